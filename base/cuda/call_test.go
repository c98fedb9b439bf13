package cuda

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestHeaderCheckCovers: every C function the bindings look up by name is
// in testdata/headercheck.c, the one-off check of their C types against
// CUDA's headers (tools/gpucheck/headercheck.sh), so that a binding added
// later is not left out of it.
func TestHeaderCheckCovers(t *testing.T) {
	if _, err := os.Stat("driver.go"); err != nil {
		t.Skipf("the package's sources are not here (a test binary run elsewhere: the device check): %v", err)
	}
	check, err := os.ReadFile("testdata/headercheck.c")
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sym := regexp.MustCompile(`"((?:cu|nvrtc|cublas|cuda)[A-Z]\w*)"`)
	n := 0
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sym.FindAllStringSubmatch(string(b), -1) {
			if strings.HasSuffix(m[1], "_t") {
				continue // a type's name (cublasStatus_t), not a function
			}
			n++
			if !strings.Contains(string(check), "= "+m[1]+";") {
				t.Errorf("%s: %s is not checked in testdata/headercheck.c", f, m[1])
			}
		}
	}
	if n < 50 {
		t.Errorf("found %d bound functions, want the driver's, NVRTC's and cuBLAS's (50 or more)", n)
	}
}
