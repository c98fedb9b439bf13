//go:build amd64 && !purego

package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// packValues returns n floats for the packing tests: normal values with
// the rounding's hard cases (ties, carries, subnormals, zeros of both
// signs, infinities, NaNs) mixed in at random places.
func packValues(rng *rand.Rand, n int) []float32 {
	special := bf16Cases(rng)[:18]
	special = append(special, float32(math.NaN()), math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00001),
		float32(math.Copysign(0, -1)))
	x := make([]float32, n)
	for i := range x {
		if rng.IntN(4) == 0 {
			x[i] = special[rng.IntN(len(special))]
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

// packKernels are the kernel layouts whose panels the AVX2 packers fill:
// AVX2's 6 x 16 and AVX-512's 12 x 32 (only packed here, never run, so
// they are tested on any CPU with AVX2).
func packKernels() []kernelSpec {
	return []kernelSpec{selectKernel(false, true), selectKernel(true, false)}
}

// samePacking reports the first index where got and want differ in their
// bits, and whether the guard floats around the packed region (guard
// before, guard after) kept their value.
func samePacking(got, want []float32, guard int) error {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Errorf("element %d (of %d, from the guard): %#08x, want %#08x", i-guard, len(want)-2*guard,
				math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
	return nil
}

// TestPackAsmMatchesGo checks the AVX2 packers against packAGo and packBGo
// bit for bit: both transposes, alpha 1 and not, bfloat16 rounding on and
// off, odd leading dimensions, and shapes that leave every tail (rows past
// a panel's last, columns past the last of a panel, k not a multiple of
// 8, an offset block of rows and columns); floats on either side of the
// packed region must stay untouched.
func TestPackAsmMatchesGo(t *testing.T) {
	if !packAsm {
		t.Skip("no AVX2 on this CPU: the assembly packers cannot run")
	}
	orig := kern
	defer func() { kern = orig; packAsm = true }()
	rng := rand.New(rand.NewPCG(61, 62))
	const guard = 8
	type shape struct{ rows, kb int } // rows: m of A or n of B; kb: k
	shapes := []shape{{1, 1}, {5, 7}, {6, 8}, {7, 9}, {12, 16}, {13, 17}, {17, 31}, {33, 64}, {48, 256}, {41, 5}, {3, 24}, {16, 15}}
	for _, spec := range packKernels() {
		kern = spec
		for _, s := range shapes {
			for _, trans := range []bool{false, true} {
				for _, alpha := range []float32{1, -0.7} {
					for _, round := range []bool{false, true} {
						name := fmt.Sprintf("%s/rows=%d/k=%d/trans=%v/alpha=%v/round=%v", spec.name, s.rows, s.kb, trans, alpha, round)
						// A block at an offset (ic, pc) inside a larger matrix
						// with an odd leading dimension and no slack at the end.
						ic, pc := 3, 5
						a, lda := packMatrix(rng, trans, ic+s.rows+2, pc+s.kb+1)
						np := (s.rows + spec.mr - 1) / spec.mr
						want := packValues(rng, np*s.kb*spec.mr+2*guard)
						got := append([]float32(nil), want...)
						packAsm = false
						packA(trans, a, lda, ic, s.rows, pc, s.kb, alpha, want[guard:len(want)-guard], round)
						packAsm = true
						packA(trans, a, lda, ic, s.rows, pc, s.kb, alpha, got[guard:len(got)-guard], round)
						if err := samePacking(got, want, guard); err != nil {
							t.Errorf("packA %s: %v", name, err)
						}
						if alpha != 1 {
							continue // B has no alpha
						}
						// op(B) is k x n, n = s.rows columns from column ic.
						b, ldb := packMatrix(rng, trans, pc+s.kb+1, ic+s.rows+2)
						npb := (s.rows + spec.nr - 1) / spec.nr
						want = packValues(rng, npb*s.kb*spec.nr+2*guard)
						got = append([]float32(nil), want...)
						packAsm = false
						packB(trans, b, ldb, pc, s.kb, ic, s.rows, want[guard:len(want)-guard], round)
						packAsm = true
						packB(trans, b, ldb, pc, s.kb, ic, s.rows, got[guard:len(got)-guard], round)
						if err := samePacking(got, want, guard); err != nil {
							t.Errorf("packB %s: %v", name, err)
						}
					}
				}
			}
		}
	}
}

// packMatrix returns the storage of an r x c matrix op(X) (X is r x c, or
// c x r when trans) with an odd leading dimension, ending at its last
// element, and the leading dimension.
func packMatrix(rng *rand.Rand, trans bool, r, c int) ([]float32, int) {
	if trans {
		r, c = c, r
	}
	ld := c + 3
	return packValues(rng, (r-1)*ld+c), ld
}

// BenchmarkPack times packA (one block of mc x 256 of A, as GemmWork packs
// it) and packB (256 x 512 of B) in Go and in AVX2 assembly, for both
// transposes, with and without bfloat16 rounding; GB/cpu-s counts the
// bytes of packed panels written per CPU-second.
func BenchmarkPack(b *testing.B) {
	if !packAsm {
		b.Skip("no AVX2 on this CPU: the assembly packers cannot run")
	}
	defer func() { packAsm = true }()
	rng := rand.New(rand.NewPCG(63, 64))
	mc, kb, n := mcBlock(), kcBlock, 512
	x := randSlice(rng, max(mc, n)*kb)
	dst := make([]float32, max(mc+kern.mr, n+kern.nr)*kb)
	for _, op := range []string{"A", "B"} {
		for _, trans := range []bool{false, true} {
			for _, round := range []bool{false, true} {
				for _, impl := range []string{"go", "asm"} {
					b.Run(fmt.Sprintf("%s/trans=%v/round=%v/%s", op, trans, round, impl), func(b *testing.B) {
						packAsm = impl == "asm"
						rows, mult := mc, kern.mr // A: mc rows of op(A), in panels of mr
						if op == "B" {
							rows, mult = n, kern.nr
						}
						ld := kb // op(X) is rows x kb (A) or kb x rows (B)
						if trans == (op == "A") {
							ld = rows
						}
						bytes := float64(4 * kb * (rows + mult - 1) / mult * mult)
						pack := func() {
							if op == "A" {
								packA(trans, x, ld, 0, rows, 0, kb, 1, dst, round)
							} else {
								packB(trans, x, ld, 0, kb, 0, rows, dst, round)
							}
						}
						pack() // the panels' pages touched before timing
						c0 := processCPU()
						for b.Loop() {
							pack()
						}
						b.ReportMetric(bytes*float64(b.N)/(processCPU()-c0)/1e9, "GB/cpu-s")
					})
				}
			}
		}
	}
}
