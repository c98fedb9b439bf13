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
		return kernelSpec{name: "avx512", mr: 12, nr: 32, run: runAVX512, runS: runSAVX512,
			edges: []edgeKernel{{8, runS8AVX512}, {4, runS4AVX512}}, narrow: runSNAVX512}
	case avx2:
		return kernelSpec{name: "avx2", mr: 6, nr: 16, run: runAVX2, runS: runSAVX2,
			edges: []edgeKernel{{4, runS4AVX2}}, narrow: runSNAVX2}
	}
	return genericKernel
}

// kern12x32AVX512 computes C[0:12, 0:32] += A*B over k steps of packed
// panels (A: 12 floats per step, B: 32 floats per step); ldc in elements.
// flags as for the strided kernels: bit 1 stores bias + A*B (bias a
// 32-float row) without reading C; bit 0: ReLU.
//
//go:noescape
func kern12x32AVX512(k int, a, b, c *float32, ldc int, bias *float32, flags int)

// kern6x16AVX2 is kern12x32AVX512 for a 6 x 16 tile.
//
//go:noescape
func kern6x16AVX2(k int, a, b, c *float32, ldc int, bias *float32, flags int)

// kernS12x32AVX512 computes C[0:12, 0:32] += A*B with A unpacked (row i at
// a + i*lda), B a packed 32-column panel. flags bit 1: the result is
// bias + A*B (bias a 32-float row) instead of C + A*B; bit 0: ReLU.
//
//go:noescape
func kernS12x32AVX512(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

// kernS6x16AVX2 is kernS12x32AVX512 for a 6 x 16 tile.
//
//go:noescape
func kernS6x16AVX2(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

// kernS8x32AVX512 is kernS12x32AVX512 for an 8 x 32 tile.
//
//go:noescape
func kernS8x32AVX512(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

// kernS4x32AVX512 is kernS12x32AVX512 for a 4 x 32 tile.
//
//go:noescape
func kernS4x32AVX512(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

// kernS4x16AVX2 is kernS6x16AVX2 for a 4 x 16 tile.
//
//go:noescape
func kernS4x16AVX2(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

func runS8AVX512(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[7*lda+k-1]
	_ = b[32*k-1]
	_ = c[7*ldc+31]
	kernS8x32AVX512(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 32), flags(bias, relu))
}

func runS4AVX512(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[3*lda+k-1]
	_ = b[32*k-1]
	_ = c[3*ldc+31]
	kernS4x32AVX512(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 32), flags(bias, relu))
}

func runS4AVX2(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[3*lda+k-1]
	_ = b[16*k-1]
	_ = c[3*ldc+15]
	kernS4x16AVX2(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 16), flags(bias, relu))
}

// kernSN12x16AVX512 computes C[0:12, 0:16] += A*B from the left half of a
// packed 32-column B panel.
//
//go:noescape
func kernSN12x16AVX512(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

// kernSN6x8AVX2 computes C[0:6, 0:8] += A*B from the left half of a packed
// 16-column B panel.
//
//go:noescape
func kernSN6x8AVX2(k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, flags int)

func runSNAVX512(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[11*lda+k-1]
	_ = b[32*k-1]
	_ = c[11*ldc+15]
	kernSN12x16AVX512(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 16), flags(bias, relu))
}

func runSNAVX2(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[5*lda+k-1]
	_ = b[16*k-1]
	_ = c[5*ldc+7]
	kernSN6x8AVX2(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 8), flags(bias, relu))
}

// biasPtr returns &bias[0] after checking it holds a tile row of width
// floats, or nil for no bias.
func biasPtr(bias []float32, width int) *float32 {
	if bias == nil {
		return nil
	}
	_ = bias[width-1]
	return &bias[0]
}

// flags encodes the strided kernels' store mode: bit 1 bias, bit 0 ReLU.
func flags(bias []float32, relu bool) int {
	f := 0
	if bias != nil {
		f |= 2
	}
	if relu {
		f |= 1
	}
	return f
}

func runSAVX512(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[11*lda+k-1]
	_ = b[32*k-1]
	_ = c[11*ldc+31]
	kernS12x32AVX512(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 32), flags(bias, relu))
}

func runSAVX2(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	if k == 0 {
		return
	}
	_ = a[5*lda+k-1]
	_ = b[16*k-1]
	_ = c[5*ldc+15]
	kernS6x16AVX2(k, &a[0], lda, &b[0], &c[0], ldc, biasPtr(bias, 16), flags(bias, relu))
}

func runAVX512(k int, a, b []float32, c []float32, ldc int, bias []float32) {
	if k == 0 {
		return
	}
	_ = a[12*k-1]
	_ = b[32*k-1]
	_ = c[11*ldc+31]
	kern12x32AVX512(k, &a[0], &b[0], &c[0], ldc, biasPtr(bias, 32), flags(bias, false))
}

func runAVX2(k int, a, b []float32, c []float32, ldc int, bias []float32) {
	if k == 0 {
		return
	}
	_ = a[6*k-1]
	_ = b[16*k-1]
	_ = c[5*ldc+15]
	kern6x16AVX2(k, &a[0], &b[0], &c[0], ldc, biasPtr(bias, 16), flags(bias, false))
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
