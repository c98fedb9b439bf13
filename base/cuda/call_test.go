package cuda

import (
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestCallAllocs: a C call through fastCaller, the way every CUDA call on
// a serving path goes (a graph launch, a stream sync, an async copy from
// pinned memory), allocates nothing; an out-parameter written through
// call (set-up calls) comes back. It calls libc (abs, and memcpy into a Go
// variable) in place of CUDA.
func TestCallAllocs(t *testing.T) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skipf("no libc.so.6 to call: %v", err)
	}
	abs, err := purego.Dlsym(h, "abs")
	if err != nil {
		t.Fatal(err)
	}
	memcpy, err := purego.Dlsym(h, "memcpy")
	if err != nil {
		t.Fatal(err)
	}
	var r int32
	neg := int32(-7)
	var fc fastCaller
	if a := testing.AllocsPerRun(100, func() { r = fc.call(abs, uintptr(uint32(neg))) }); a != 0 || r != 7 {
		t.Errorf("abs(-7) = %d with %.1f allocations, want 7 with none", r, a)
	}
	src := []int32{42}
	var dst int32
	call(memcpy, uintptr(unsafe.Pointer(&dst)), uintptr(unsafe.Pointer(&src[0])), 4)
	if dst != 42 {
		t.Errorf("out-parameter = %d, want 42", dst)
	}
}
