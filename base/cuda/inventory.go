package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Library is one CUDA library as the engine would load it: where it was
// found, the file behind that name, and the version the library itself
// reports; or why it could not be opened.
type Library struct {
	Name    string `json:"name"`           // e.g. "libcuda"
	Path    string `json:"path,omitempty"` // the file opened
	File    string `json:"file,omitempty"` // Path with symbolic links resolved, where it differs
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

// String reads "name version (path -> file)" or "name: error".
func (l Library) String() string {
	if l.Error != "" {
		return l.Name + ": " + l.Error
	}
	s := l.Name + " " + l.Version + " (" + l.Path
	if l.File != "" {
		s += " -> " + l.File
	}
	return s + ")"
}

// KernelModuleFile is where Linux's NVIDIA driver states its version.
const KernelModuleFile = "/proc/driver/nvidia/version"

// Libraries finds and opens the libraries the engine uses, as it does
// (SearchDirs(extra), then the dynamic loader), and asks each for its
// version: the NVIDIA kernel module's release (KernelModuleFile), libcuda
// (the CUDA version of the driver API), NVRTC, cuBLAS, cuBLASLt and the
// CUDA runtime. None of it needs a GPU; a library missing is an entry
// with its error.
func Libraries(extra string) []Library {
	dirs := SearchDirs(extra)
	libs := []Library{kernelModule(KernelModuleFile)}
	add := func(name string, names []string, version func(*lib) (string, error)) {
		l := Library{Name: name}
		h, err := openLib(name, names, dirs)
		if err == nil {
			l.Path, l.File = h.path, resolved(h.path)
			l.Version, err = version(h)
		}
		if err != nil {
			l.Error = err.Error()
		}
		libs = append(libs, l)
	}
	add("libcuda", driverNames, func(h *lib) (string, error) {
		return intVersion(h, "cuDriverGetVersion")
	})
	add("libnvrtc", nvrtcNames, func(h *lib) (string, error) {
		fn, err := sym(h, "nvrtcVersion")
		if err != nil {
			return "", err
		}
		var ma, mi int32
		if r := call(fn, uintptr(unsafe.Pointer(&ma)), uintptr(unsafe.Pointer(&mi))); r != 0 {
			return "", fmt.Errorf("nvrtcVersion: result %d", r)
		}
		return fmt.Sprintf("%d.%d", ma, mi), nil
	})
	// cuBLAS and cuBLASLt are looked for where openBLAS looks: the CUDA
	// runtime first, then cuBLASLt and cuBLAS of one folder.
	add("libcudart", cudartNames, func(h *lib) (string, error) {
		return intVersion(h, "cudaRuntimeGetVersion")
	})
	blas, berr := openBLAS(extra)
	l := Library{Name: "libcublas"}
	if berr != nil {
		l.Error = berr.Error()
		libs = append(libs, l, Library{Name: "libcublasLt", Error: "libcublas not found"})
		return libs
	}
	l.Path, l.File = blas.path, resolved(blas.path)
	var err error
	if l.Version, err = blasVersion(blas); err != nil {
		l.Error = err.Error()
	}
	libs = append(libs, l)
	lt := Library{Name: "libcublasLt", Path: mappedPath("libcublasLt.so.1")}
	lt.File = resolved(lt.Path)
	if fn, err := purego.Dlsym(blas.h, "cublasLtGetVersion"); err == nil && fn != 0 {
		v, _, _ := purego.SyscallN(fn)
		lt.Version = dotted(int(v), 10000, 100)
	} else {
		lt.Version = "unknown (no cublasLtGetVersion)"
	}
	return append(libs, lt)
}

// kernelModule reads the NVIDIA kernel module's release from path
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat ...").
func kernelModule(path string) Library {
	l := Library{Name: "nvidia kernel module", Path: path}
	b, err := os.ReadFile(path)
	if err != nil {
		l.Path, l.Error = "", fmt.Sprintf("no NVIDIA kernel module (%v)", err)
		return l
	}
	first, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(first)
	for i, w := range f {
		if w == "Module" && i+1 < len(f) {
			l.Version = f[i+1]
			return l
		}
	}
	l.Version = strings.TrimSpace(first)
	return l
}

// sym returns function name of h.
func sym(h *lib, name string) (uintptr, error) {
	fn, err := purego.Dlsym(h.h, name)
	if err != nil || fn == 0 {
		return 0, fmt.Errorf("%s has no %s", h.path, name)
	}
	return fn, nil
}

// intVersion calls fn(int*) of h (cuDriverGetVersion,
// cudaRuntimeGetVersion: 12040 for 12.4) and returns "12.4".
func intVersion(h *lib, name string) (string, error) {
	fn, err := sym(h, name)
	if err != nil {
		return "", err
	}
	var v int32
	if r := call(fn, uintptr(unsafe.Pointer(&v))); r != 0 {
		return "", fmt.Errorf("%s: result %d", name, r)
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
}

// blasVersion asks cuBLAS for its major.minor.patch (cublasGetProperty,
// which needs no handle).
func blasVersion(h *lib) (string, error) {
	fn, err := sym(h, "cublasGetProperty")
	if err != nil {
		return "", err
	}
	var parts [3]int32 // MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
	for i := range parts {
		if r := call(fn, uintptr(i), uintptr(unsafe.Pointer(&parts[i]))); r != 0 {
			return "", fmt.Errorf("cublasGetProperty: status %d", r)
		}
	}
	return fmt.Sprintf("%d.%d.%d", parts[0], parts[1], parts[2]), nil
}

// dotted writes v, encoded as major*a + minor*b + patch, as
// "major.minor.patch".
func dotted(v, a, b int) string {
	return fmt.Sprintf("%d.%d.%d", v/a, v%a/b, v%b)
}

// resolved is path with its symbolic links resolved, or "" where that is
// path itself or cannot be resolved.
func resolved(path string) string {
	if f, err := filepath.EvalSymlinks(path); err == nil && f != path {
		return f
	}
	return ""
}
