package sgemm

import "testing"

// TestUsePortable: on, the bf16 and int8 kernels are the portable ones;
// off, the assembly ones exactly where the CPU (and build) has them.
func TestUsePortable(t *testing.T) {
	defer UsePortable(false)
	for _, tc := range []struct {
		on         bool
		bf16, int8 bool
	}{
		{true, false, false},
		{false, bf16AsmAvailable(), i8AsmAvailable()},
		{true, false, false},
	} {
		UsePortable(tc.on)
		if BF16Native() != tc.bf16 || I8Native() != tc.int8 {
			t.Errorf("UsePortable(%v): BF16Native %v, I8Native %v; want %v, %v", tc.on, BF16Native(), I8Native(), tc.bf16, tc.int8)
		}
	}
}
