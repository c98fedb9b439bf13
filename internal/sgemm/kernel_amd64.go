//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// kern is the micro-kernel in use, chosen once from the CPU's features.
var kern = selectKernel(cpu.X86.HasAVX512F, cpu.X86.HasAVX2 && cpu.X86.HasFMA)

// selectKernel picks the widest kernel the CPU (and OS, which x/sys/cpu
// checks through XGETBV) supports.
func selectKernel(avx512, avx2 bool) kernelSpec {
	switch {
	case avx512:
		return kernelSpec{name: "avx512", mr: 12, nr: 32, run: runAVX512}
	case avx2:
		return kernelSpec{name: "avx2", mr: 6, nr: 16, run: runAVX2}
	}
	return genericKernel
}

// kern12x32AVX512 computes C[0:12, 0:32] += A*B over k steps of packed
// panels (A: 12 floats per step, B: 32 floats per step); ldc in elements.
//
//go:noescape
func kern12x32AVX512(k int, a, b, c *float32, ldc int)

// kern6x16AVX2 computes C[0:6, 0:16] += A*B over k steps of packed panels.
//
//go:noescape
func kern6x16AVX2(k int, a, b, c *float32, ldc int)

func runAVX512(k int, a, b []float32, c []float32, ldc int) {
	if k == 0 {
		return
	}
	_ = a[12*k-1]
	_ = b[32*k-1]
	_ = c[11*ldc+31]
	kern12x32AVX512(k, &a[0], &b[0], &c[0], ldc)
}

func runAVX2(k int, a, b []float32, c []float32, ldc int) {
	if k == 0 {
		return
	}
	_ = a[6*k-1]
	_ = b[16*k-1]
	_ = c[5*ldc+15]
	kern6x16AVX2(k, &a[0], &b[0], &c[0], ldc)
}

// availableKernels lists every kernel this CPU can run (for tests).
func availableKernels() []kernelSpec {
	ks := []kernelSpec{genericKernel}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, selectKernel(false, true))
	}
	if cpu.X86.HasAVX512F {
		ks = append(ks, selectKernel(true, false))
	}
	return ks
}
