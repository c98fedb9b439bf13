//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// bf16Asm selects the AVX512_BF16 kernels (tests switch it off to compare
// with the portable ones).
var bf16Asm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16

// bf16AsmAvailable reports whether this CPU can run the AVX512_BF16 kernels.
func bf16AsmAvailable() bool { return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16 }

// roundAVX2 selects the AVX2 rounding loop (tests switch it off).
var roundAVX2 = cpu.X86.HasAVX2

// roundBF16AVX2 rounds n floats (a multiple of 8) to bfloat16 in place.
//
//go:noescape
func roundBF16AVX2(x *float32, n int)

// roundBF16 rounds x to bfloat16 in place as roundBF16Go does, 8 values
// at a time in assembly where the CPU has AVX2.
func roundBF16(x []float32) {
	n := 0
	if roundAVX2 {
		n = len(x) &^ 7
		if n > 0 {
			roundBF16AVX2(&x[0], n)
		}
	}
	roundBF16Go(x[n:])
}

// kernBF16x12x32 computes a 12 x 32 tile of C from bf16 rows of A (row i at
// a + i*lda, kp pairs) and a packed 32-column panel of bf16 pairs; flags
// bit 1: the result is bias + A*B instead of C + A*B; bit 0: ReLU.
//
//go:noescape
func kernBF16x12x32(kp int, a *uint16, lda int, b *uint32, c *float32, ldc int, bias *float32, flags int)

// kernBF16x8x32 is kernBF16x12x32 for an 8 x 32 tile.
//
//go:noescape
func kernBF16x8x32(kp int, a *uint16, lda int, b *uint32, c *float32, ldc int, bias *float32, flags int)

// kernBF16x4x32 is kernBF16x12x32 for a 4 x 32 tile.
//
//go:noescape
func kernBF16x4x32(kp int, a *uint16, lda int, b *uint32, c *float32, ldc int, bias *float32, flags int)

// kernBF16x12x16 is kernBF16x12x32 for the left 16 columns of the panel.
//
//go:noescape
func kernBF16x12x16(kp int, a *uint16, lda int, b *uint32, c *float32, ldc int, bias *float32, flags int)

// kernBF16x8x16 is kernBF16x12x16 for an 8 x 16 tile.
//
//go:noescape
func kernBF16x8x16(kp int, a *uint16, lda int, b *uint32, c *float32, ldc int, bias *float32, flags int)

// kernBF16x4x16 is kernBF16x12x16 for a 4 x 16 tile.
//
//go:noescape
func kernBF16x4x16(kp int, a *uint16, lda int, b *uint32, c *float32, ldc int, bias *float32, flags int)

// cvtBF16AVX512 rounds n floats (a positive multiple of 32) to bf16.
//
//go:noescape
func cvtBF16AVX512(dst *uint16, src *float32, n int)

// kernBF16 computes a rows x cols tile (rows 4, 8 or 12; cols 16 or 32) as
// kernBF16Go does, in assembly when the CPU has AVX512_BF16.
func kernBF16(rows, cols, kp int, a []uint16, lda int, b []uint32, c []float32, ldc int, bias []float32, relu bool) {
	if !bf16Asm {
		kernBF16Go(rows, cols, kp, a, lda, b, c, ldc, bias, relu)
		return
	}
	if kp == 0 {
		return
	}
	_ = a[(rows-1)*lda+2*kp-1]
	_ = b[bf16NR*kp-1]
	_ = c[(rows-1)*ldc+cols-1]
	ap, bp, cp, bias0, f := &a[0], &b[0], &c[0], biasPtr(bias, cols), flags(bias, relu)
	switch {
	case rows == 12 && cols == 32:
		kernBF16x12x32(kp, ap, lda, bp, cp, ldc, bias0, f)
	case rows == 8 && cols == 32:
		kernBF16x8x32(kp, ap, lda, bp, cp, ldc, bias0, f)
	case rows == 4 && cols == 32:
		kernBF16x4x32(kp, ap, lda, bp, cp, ldc, bias0, f)
	case rows == 12 && cols == 16:
		kernBF16x12x16(kp, ap, lda, bp, cp, ldc, bias0, f)
	case rows == 8 && cols == 16:
		kernBF16x8x16(kp, ap, lda, bp, cp, ldc, bias0, f)
	case rows == 4 && cols == 16:
		kernBF16x4x16(kp, ap, lda, bp, cp, ldc, bias0, f)
	default:
		panic("sgemm: no bf16 kernel for this tile")
	}
}

// toBF16 rounds src to bf16 into dst (at least as long), 32 values at a
// time in assembly when the CPU has AVX512_BF16.
func toBF16(dst []uint16, src []float32) {
	n := 0
	if bf16Asm {
		n = len(src) &^ 31
		if n > 0 {
			_ = dst[n-1]
			cvtBF16AVX512(&dst[0], &src[0], n)
		}
	}
	toBF16Go(dst[n:], src[n:])
}
