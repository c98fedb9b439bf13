package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// lib is one shared library opened with dlopen, its functions looked up
// by name.
type lib struct {
	path string // the file opened
	h    uintptr
}

// openLib finds the first of names in dirs and opens it; where no folder
// holds one, it asks the dynamic loader for each soname of names (its
// cache and configured folders: a driver installed where no folder of
// dirs points).
func openLib(what string, names, dirs []string) (*lib, error) {
	p, err := findLib(what, names, dirs)
	if err != nil {
		return viaLoader(names, err)
	}
	h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("cuda: open %s: %w", p, err)
	}
	return &lib{path: p, h: h}, nil
}

// viaLoader opens the first soname of names (a name with a version after
// ".so.") that the dynamic loader finds, its path the file the process
// then maps; else it returns notFound (findLib's error), saying that the
// loader has none of them either.
func viaLoader(names []string, notFound error) (*lib, error) {
	for _, n := range names {
		if !strings.Contains(n, ".so.") {
			continue // a bare .so is a development link, not a soname
		}
		if h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return &lib{path: mappedPath(n), h: h}, nil
		}
	}
	return nil, fmt.Errorf("%w; the dynamic loader has none of them either", notFound)
}

// mappedPath returns the file of the process's mappings (/proc/self/maps)
// that is soname's library (libcuda.so.1: libcuda.so.535.104.05, or a
// wheel's hashed libcuda-0123abcd.so.1), or soname where there is none.
func mappedPath(soname string) string {
	stem := soname[:strings.Index(soname, ".so")]
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return soname
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		if b := filepath.Base(f[5]); strings.HasPrefix(b, stem+".so") || strings.HasPrefix(b, stem+"-") {
			return f[5]
		}
	}
	return soname
}

// syms looks up every function of fns (name -> where its address goes),
// failing on the first missing one unless it is optional.
func (l *lib) syms(fns map[string]*uintptr, optional map[string]bool) error {
	for name, at := range fns {
		s, err := purego.Dlsym(l.h, name)
		if err != nil || s == 0 {
			if optional[name] {
				continue
			}
			return fmt.Errorf("cuda: %s has no function %s (too old a version?)", l.path, name)
		}
		*at = s
	}
	return nil
}

// call calls the C function at fn with integer and pointer arguments and
// returns its int result (CUresult, nvrtcResult, cublasStatus_t). Like
// purego.SyscallN, it moves what its uintptr arguments point to onto the
// heap for the call (go:uintptrescapes): an out-parameter on a goroutine
// stack that moved would otherwise be written at its old address.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(uint32(r))
}

// fastCaller makes C calls that allocate nothing, for the serving path:
// its arguments are copied into a buffer of its own, so that no slice is
// made per call. They must not point into Go memory that could move or be
// freed (goroutine stacks): pass C memory (device addresses, pinned
// buffers, handles) or Go heap objects kept alive elsewhere. Not safe for
// concurrent use: a Device's runs on its thread.
type fastCaller struct{ buf [16]uintptr }

func (c *fastCaller) call(fn uintptr, args ...uintptr) int32 {
	n := copy(c.buf[:], args)
	r, _, _ := purego.SyscallN(fn, c.buf[:n]...)
	return int32(uint32(r))
}

// callPtr calls the C function at fn and returns its pointer result (its
// arguments as call's).
//
//go:uintptrescapes
func callPtr(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// cstr returns s as a NUL-terminated C string; keep the slice alive while
// C reads it.
func cstr(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// gostr copies the NUL-terminated C string at p.
func gostr(p uintptr) string {
	if p == 0 {
		return ""
	}
	// C memory: the conversion through a variable keeps vet's
	// uintptr-to-pointer rule, as the address is not Go's.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	var n int
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}
