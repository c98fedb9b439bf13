//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// i8Asm selects the AVX512_VNNI kernels (tests switch it off to compare
// with the portable ones).
var i8Asm = i8AsmAvailable()

// i8AsmAvailable reports whether this CPU can run the AVX512_VNNI kernels.
func i8AsmAvailable() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI
}

// kernI8x12x32 computes a 12 x 32 tile of C from uint8 rows of A (row i at
// a + i*lda, kq groups of 4 bytes) and a packed 32-column panel of int8
// groups, as kernI8Go does (row i's scale at sa + i*sas floats, its zero
// point at za + i*zas, its base at bias + i*bs; sw, cs and each base row:
// 32 values; relu != 0: clamp at 0).
//
//go:noescape
func kernI8x12x32(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x8x32 is kernI8x12x32 for a 8 x 32 tile.
//
//go:noescape
func kernI8x8x32(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x4x32 is kernI8x12x32 for a 4 x 32 tile.
//
//go:noescape
func kernI8x4x32(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x1x32 is kernI8x12x32 for a 1 x 32 tile.
//
//go:noescape
func kernI8x1x32(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x12x16 is kernI8x12x32 for a 12 x 16 tile (the left 16 columns of the panel).
//
//go:noescape
func kernI8x12x16(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x8x16 is kernI8x12x32 for a 8 x 16 tile (the left 16 columns of the panel).
//
//go:noescape
func kernI8x8x16(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x4x16 is kernI8x12x32 for a 4 x 16 tile (the left 16 columns of the panel).
//
//go:noescape
func kernI8x4x16(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// kernI8x1x16 is kernI8x12x32 for a 1 x 16 tile (the left 16 columns of the panel).
//
//go:noescape
func kernI8x1x16(kq int, a *uint8, lda int, b *int8, c *float32, ldc int, sa *float32, sas int, za *int32, zas int, sw *float32, cs *int32, bias *float32, bs int, relu int)

// quantU8AVX512 quantizes n floats (a positive multiple of 16) as
// quantU8Go does.
//
//go:noescape
func quantU8AVX512(dst *uint8, src *float32, n int, inv float32)

// quantRowsAVX512 quantizes rows as quantRowsU8Go does (cols a
// positive multiple of 16).
//
//go:noescape
func quantRowsAVX512(dst *uint8, ldd int, src *float32, lds, rows, cols int, scales *float32, zeros *int32)

// quantRowsU8 is quantRowsU8Go, in assembly when the CPU has
// AVX512_VNNI and cols is a multiple of 16.
func quantRowsU8(dst []uint8, ldd int, src []float32, lds, rows, cols int, scales []float32, zeros []int32) {
	if !i8Asm || cols%16 != 0 {
		quantRowsU8Go(dst, ldd, src, lds, rows, cols, scales, zeros)
		return
	}
	quantRowsAVX512(&dst[0], ldd, &src[0], lds, rows, cols, &scales[0], &zeros[0])
}

// kernI8 computes a rows x cols tile (rows 1, 4, 8 or 12; cols 16 or 32) as
// kernI8Go does, in assembly when the CPU has AVX512_VNNI.
func kernI8(rows, cols, kq int, a []uint8, lda int, b []int8, c []float32, ldc int, sa []float32, sas int, za []int32, zas int, sw []float32, cs []int32, bias []float32, bs int, relu bool) {
	if !i8Asm || kq == 0 {
		kernI8Go(rows, cols, kq, a, lda, b, c, ldc, sa, sas, za, zas, sw, cs, bias, bs, relu)
		return
	}
	_ = a[(rows-1)*lda+4*kq-1]
	_ = b[i8NR*4*kq-1]
	_ = c[(rows-1)*ldc+cols-1]
	_, _ = sa[(rows-1)*sas], za[(rows-1)*zas]
	_, _, _ = sw[cols-1], cs[cols-1], bias[(rows-1)*bs+cols-1]
	r := 0
	if relu {
		r = 1
	}
	// Direct calls (not a table of func values), so that the kernels'
	// noescape pointers leave the caller's arrays on its stack.
	ap, bp, cp, sap, zap, swp, csp, bip := &a[0], &b[0], &c[0], &sa[0], &za[0], &sw[0], &cs[0], &bias[0]
	switch {
	case rows == 12 && cols == 32:
		kernI8x12x32(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 8 && cols == 32:
		kernI8x8x32(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 4 && cols == 32:
		kernI8x4x32(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 1 && cols == 32:
		kernI8x1x32(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 12 && cols == 16:
		kernI8x12x16(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 8 && cols == 16:
		kernI8x8x16(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 4 && cols == 16:
		kernI8x4x16(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	case rows == 1 && cols == 16:
		kernI8x1x16(kq, ap, lda, bp, cp, ldc, sap, sas, zap, zas, swp, csp, bip, bs, r)
	default:
		panic("sgemm: no int8 kernel for this tile")
	}
}

// quantU8 quantizes src into dst (at least as long), 16 values at a time
// in assembly when the CPU has AVX512_VNNI.
func quantU8(dst []uint8, src []float32, inv float32) {
	n := 0
	if i8Asm {
		n = len(src) &^ 15
		if n > 0 {
			_ = dst[n-1]
			quantU8AVX512(&dst[0], &src[0], n, inv)
		}
	}
	quantU8Go(dst[n:], src[n:], inv)
}
