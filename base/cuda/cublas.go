package cuda

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/ebitengine/purego"
)

// BLAS is a cuBLAS handle bound to one stream of a device. Its methods
// must run on the device's thread (inside Device.Do).
type BLAS struct {
	lib                                          *lib
	create, destroy, setStream, setMath, setWork uintptr
	sgemm, statusString                          uintptr
	h                                            uintptr
	fast                                         fastCaller
	alpha, beta                                  [2]float32 // 1, 0 and 1, 1: read by cuBLAS at each call
}

// Math modes of cuBLAS (cublasMath_t).
const (
	// MathFP32 computes fp32 GEMMs in fp32 (CUBLAS_PEDANTIC_MATH: no
	// reduced-precision tensor cores).
	MathFP32 = 2
	// MathTF32 lets fp32 GEMMs run on tensor cores in TF32 (10-bit
	// mantissa inputs, fp32 accumulation; CUBLAS_TF32_TENSOR_OP_MATH).
	MathTF32 = 3
)

// NewBLAS opens libcublas (from SearchDirs(libDirs)) and creates a handle
// on stream s, with workspace bytes of device memory at work (needed for
// graph capture: cuBLAS then allocates nothing inside a capture).
func (dev *Device) NewBLAS(libDirs string, s Stream, work Ptr, workBytes int) (*BLAS, error) {
	l, err := openBLAS(libDirs)
	if err != nil {
		return nil, err
	}
	b := &BLAS{lib: l, alpha: [2]float32{1, 0}, beta: [2]float32{1, 1}}
	if err := l.syms(map[string]*uintptr{
		"cublasCreate_v2": &b.create, "cublasDestroy_v2": &b.destroy, "cublasSetStream_v2": &b.setStream,
		"cublasSetMathMode": &b.setMath, "cublasSetWorkspace_v2": &b.setWork, "cublasSgemm_v2": &b.sgemm,
		"cublasGetStatusString": &b.statusString,
	}, map[string]bool{"cublasSetWorkspace_v2": true, "cublasGetStatusString": true}); err != nil {
		return nil, err
	}
	if err := b.check("cublasCreate_v2", call(b.create, uintptr(unsafe.Pointer(&b.h)))); err != nil {
		return nil, err
	}
	if err := b.check("cublasSetStream_v2", call(b.setStream, b.h, uintptr(s))); err != nil {
		return nil, err
	}
	if b.setWork != 0 && workBytes > 0 {
		if err := b.check("cublasSetWorkspace_v2", call(b.setWork, b.h, uintptr(work), uintptr(workBytes))); err != nil {
			return nil, err
		}
	}
	return b, b.SetMath(MathFP32)
}

// Path is the library's file.
func (b *BLAS) Path() string { return b.lib.path }

// openBLAS opens libcublas from SearchDirs(libDirs), or through the
// dynamic loader where none of them holds it.
func openBLAS(libDirs string) (*lib, error) {
	dirs := SearchDirs(libDirs)
	p, err := findLib("cuBLAS (libcublas)", cublasNames, dirs)
	if err != nil {
		return viaLoader(cublasNames, err)
	}
	// libcublas needs libcublasLt of its folder, and some builds the CUDA
	// runtime, which the loader may not find (the NVIDIA wheels' folders
	// are not on its path): open them first, globally.
	if rt, err := findLib("the CUDA runtime (libcudart)", cudartNames, dirs); err == nil {
		if _, err := purego.Dlopen(rt, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			return nil, fmt.Errorf("cuda: open %s: %w", rt, err)
		}
	}
	if lt := globSorted(filepath.Join(filepath.Dir(p), "libcublasLt*.so*")); len(lt) > 0 {
		if _, err := purego.Dlopen(lt[0], purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			return nil, fmt.Errorf("cuda: open %s: %w", lt[0], err)
		}
	}
	return openLib("cuBLAS (libcublas)", []string{filepath.Base(p)}, []string{filepath.Dir(p)})
}

// check turns cuBLAS status r of call fn into an error.
func (b *BLAS) check(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	msg := "cuBLAS status " + fmt.Sprint(r)
	if b.statusString != 0 {
		msg = gostr(callPtr(b.statusString, uintptr(r)))
	}
	return &Error{Call: fn, Code: r, Name: "cublasStatus_t", Message: msg}
}

// SetMath sets the math mode (MathFP32 or MathTF32) of the GEMMs queued
// from now on.
func (b *BLAS) SetMath(mode int) error {
	return b.check("cublasSetMathMode", call(b.setMath, b.h, uintptr(mode)))
}

// Gemm queues C = A W (+ C when accumulate) on the handle's stream, in
// row-major terms: A is m x k with row stride lda, W is k x n with row
// stride ldw, C is m x n with row stride ldc, all float32. (cuBLAS is
// column-major: it computes C^T = W^T A^T.)
func (b *BLAS) Gemm(m, n, k int, a Ptr, lda int, w Ptr, ldw int, c Ptr, ldc int, accumulate bool) error {
	beta := &b.alpha[1]
	if accumulate {
		beta = &b.beta[1]
	}
	return b.check("cublasSgemm_v2", b.fast.call(b.sgemm, b.h, 0, 0, uintptr(n), uintptr(m), uintptr(k),
		uintptr(unsafe.Pointer(&b.alpha[0])), uintptr(w), uintptr(ldw), uintptr(a), uintptr(lda),
		uintptr(unsafe.Pointer(beta)), uintptr(c), uintptr(ldc)))
}

// Close destroys the handle.
func (b *BLAS) Close() error {
	return b.check("cublasDestroy_v2", call(b.destroy, b.h))
}
