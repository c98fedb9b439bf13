package cuda

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// NVRTC is the CUDA run-time compiler (libnvrtc), which turns CUDA C
// source into a cubin for a given architecture. It needs no GPU.
type NVRTC struct {
	lib                                             *lib
	create, compile, logSize, log, cubinSize, cubin uintptr
	destroy, errString, version                     uintptr
	mu                                              sync.Mutex // NVRTC programs are not shared; calls are serialised for the log
}

// LoadNVRTC opens libnvrtc from the folders SearchDirs(extra) lists.
func LoadNVRTC(extra string) (*NVRTC, error) {
	l, err := openLib("NVRTC (libnvrtc)", nvrtcNames, SearchDirs(extra))
	if err != nil {
		return nil, err
	}
	// NVRTC opens its builtins library by soname at the first compile;
	// the loader may not search its folder (the NVIDIA wheels'), so open
	// it first, globally.
	if bs := globSorted(filepath.Join(filepath.Dir(l.path), "libnvrtc-builtins*.so*")); len(bs) > 0 {
		if _, err := purego.Dlopen(bs[0], purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			return nil, fmt.Errorf("cuda: open %s: %w", bs[0], err)
		}
	}
	n := &NVRTC{lib: l}
	err = l.syms(map[string]*uintptr{
		"nvrtcCreateProgram": &n.create, "nvrtcCompileProgram": &n.compile,
		"nvrtcGetProgramLogSize": &n.logSize, "nvrtcGetProgramLog": &n.log,
		"nvrtcGetCUBINSize": &n.cubinSize, "nvrtcGetCUBIN": &n.cubin,
		"nvrtcDestroyProgram": &n.destroy, "nvrtcGetErrorString": &n.errString,
		"nvrtcVersion": &n.version,
	}, nil)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Path is the library's file.
func (n *NVRTC) Path() string { return n.lib.path }

// Version returns NVRTC's major and minor version (11.8 for CUDA 11.8).
func (n *NVRTC) Version() (major, minor int, err error) {
	var ma, mi int32
	if r := call(n.version, uintptr(unsafe.Pointer(&ma)), uintptr(unsafe.Pointer(&mi))); r != 0 {
		return 0, 0, n.err("nvrtcVersion", r, "")
	}
	return int(ma), int(mi), nil
}

// err is the error of an NVRTC call that returned r, with the compile log.
func (n *NVRTC) err(fn string, r int32, log string) error {
	msg := gostr(callPtr(n.errString, uintptr(r)))
	if log != "" {
		return fmt.Errorf("%s: %s (nvrtcResult %d):\n%s", fn, msg, r, log)
	}
	return fmt.Errorf("%s: %s (nvrtcResult %d)", fn, msg, r)
}

// Compiled is the result of a compilation: the cubin and NVRTC's log
// (warnings, or empty).
type Compiled struct {
	Cubin []byte // the ELF image for cuModuleLoadData
	Log   string // NVRTC's messages (warnings), trimmed
}

// Compile compiles src (file name name, for messages) to a cubin for arch
// ("sm_80", "sm_90"), with options opts added (e.g. "-DWIDTH=64"). The
// error carries NVRTC's log; a successful compilation may still log
// warnings (Compiled.Log).
func (n *NVRTC) Compile(src, name, arch string, opts ...string) (Compiled, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	csrc, cname := cstr(src), cstr(name)
	var prog uintptr
	if r := call(n.create, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&csrc[0])),
		uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); r != 0 {
		return Compiled{}, n.err("nvrtcCreateProgram "+name, r, "")
	}
	defer call(n.destroy, uintptr(unsafe.Pointer(&prog)))
	all := append([]string{"--gpu-architecture=" + arch, "--std=c++14", "--device-as-default-execution-space"}, opts...)
	cs := make([][]byte, len(all))
	ptrs := make([]uintptr, len(all))
	for i, o := range all {
		cs[i] = cstr(o)
		ptrs[i] = uintptr(unsafe.Pointer(&cs[i][0]))
	}
	r := call(n.compile, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	runtime.KeepAlive(cs)
	runtime.KeepAlive(csrc)
	runtime.KeepAlive(cname)
	log := n.progLog(prog)
	if r != 0 {
		return Compiled{Log: log}, n.err(fmt.Sprintf("nvrtcCompileProgram %s for %s", name, arch), r, log)
	}
	var size uintptr
	if r := call(n.cubinSize, prog, uintptr(unsafe.Pointer(&size))); r != 0 {
		return Compiled{Log: log}, n.err("nvrtcGetCUBINSize "+name, r, "")
	}
	if size == 0 {
		return Compiled{Log: log}, fmt.Errorf("nvrtcGetCUBINSize %s: no cubin for %s (a compute_ architecture gives PTX only)", name, arch)
	}
	cubin := make([]byte, size)
	if r := call(n.cubin, prog, uintptr(unsafe.Pointer(&cubin[0]))); r != 0 {
		return Compiled{Log: log}, n.err("nvrtcGetCUBIN "+name, r, "")
	}
	return Compiled{Cubin: cubin, Log: log}, nil
}

// progLog returns the program's compile log, trimmed ("" when empty).
func (n *NVRTC) progLog(prog uintptr) string {
	var size uintptr
	if call(n.logSize, prog, uintptr(unsafe.Pointer(&size))) != 0 || size <= 1 {
		return ""
	}
	b := make([]byte, size)
	if call(n.log, prog, uintptr(unsafe.Pointer(&b[0]))) != 0 {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
}
