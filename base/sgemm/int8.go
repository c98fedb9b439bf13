package sgemm

import (
	"fmt"
	"math"
)

// The int8 path: GemmPackedBiasI8 multiplies activations quantized to
// unsigned 8-bit integers by weights quantized to signed 8-bit integers,
// sums the products exactly in int32 and scales the sums back to float32,
// the arithmetic of the AVX512_VNNI instruction VPDPBUSD, which does four
// times the multiply-adds of VFMADD231PS per instruction (twice those of
// VDPBF16PS). The scheme is symmetric linear quantization (Jacob et al.,
// "Quantization and training of neural networks for efficient
// integer-arithmetic-only inference", CVPR 2018), with a scale per weight
// column (per output channel) and a scale per row of A chosen by the
// caller, and a zero point per row where A has negative values: row i of
// A stands for (a[i, p] - z_i) * aScale_i, which QuantizeRowsU8
// chooses from the row's range; non-negative A (ReLU outputs) needs none.
//
// Every output element is computed the same way on every path: acc = the
// exact int32 sum over k of a[p]*q[p], minus z_i times the column's sum of
// q (so exactly the sum of (a[p] - z_i)*q[p]); v = float32(acc) (round to
// nearest even), v = v*aScale (rounded), v = v*colScale (rounded), v = v +
// bias, then max(v, 0) if relu. So the portable Go kernel gives the same
// bits as the assembly one.
const (
	i8MR = 12
	i8NR = 32
	// i8MaxK bounds k so that no int32 sum can overflow (255*127*k < 2^31).
	i8MaxK = 1 << 16
)

// PackedI8 is a k x n matrix B quantized to int8, one scale per column, and
// packed for GemmPackedBiasI8. It is read-only after it is made and safe
// for concurrent use.
type PackedI8 struct {
	k, n, kq int // kq: groups of 4 rows (k rounded up to a multiple of 4)
	// data holds, for each 32-column panel, for each group q of 4 rows, 32
	// columns of 4 bytes: rows 4q..4q+3 of the column (zero past k);
	// columns past n are zero.
	data []int8
	// scale holds the columns' scales (zero past n, to a multiple of 32):
	// B[p, j] ~ q[p, j] * scale[j]; sum the columns' sums of q (zero past
	// n), for zero points.
	scale []float32
	sum   []int32
}

// K returns the inner dimension of the packed matrix.
func (p *PackedI8) K() int { return p.k }

// N returns the number of columns of the packed matrix.
func (p *PackedI8) N() int { return p.n }

// NewPackedI8 quantizes op(B), a k x n matrix (B is k x n with row stride
// ldb, or n x k when transB), to int8 with one scale per column (the
// column's largest magnitude over 127; values round to nearest even) and
// packs it.
func NewPackedI8(transB bool, k, n int, b []float32, ldb int) *PackedI8 {
	checkMat("B", transB, k, n, b, ldb)
	if k > i8MaxK {
		panic(fmt.Sprintf("sgemm: int8 GEMM with k = %d > %d could overflow int32", k, i8MaxK))
	}
	at := func(r, j int) float32 {
		if transB {
			return b[j*ldb+r]
		}
		return b[r*ldb+j]
	}
	np := (n + i8NR - 1) / i8NR
	kq := (k + 3) / 4
	p := &PackedI8{k: k, n: n, kq: kq, data: make([]int8, np*kq*i8NR*4), scale: make([]float32, np*i8NR), sum: make([]int32, np*i8NR)}
	for j := 0; j < n; j++ {
		var m float64
		for r := 0; r < k; r++ {
			m = max(m, math.Abs(float64(at(r, j))))
		}
		s := float32(m / 127)
		p.scale[j] = s
		if s == 0 {
			continue
		}
		panel := p.data[(j/i8NR)*kq*i8NR*4:]
		for r := 0; r < k; r++ {
			v := math.RoundToEven(float64(at(r, j)) / float64(s))
			v = max(-127, min(127, v))
			panel[((r/4)*i8NR+j%i8NR)*4+r%4] = int8(v)
			p.sum[j] += int32(v)
		}
	}
	return p
}

// NewPackedI8From quantizes a matrix packed for the float32 path (for
// weights prepared, e.g. with batch norm folded in, before int8 was
// chosen).
func NewPackedI8From(p *PackedB) *PackedI8 {
	return NewPackedI8(false, p.k, p.n, p.Dense(), p.n)
}

// panel returns the packed columns jp*32 .. jp*32+31.
func (p *PackedI8) panel(jp int) []int8 {
	size := p.kq * i8NR * 4
	return p.data[jp*size : (jp+1)*size]
}

// I8Native reports whether GemmPackedBiasI8 and QuantizeU8 run on the
// AVX512_VNNI assembly kernels; otherwise they run portable Go (same
// results, much slower), and callers wanting speed should not use them.
func I8Native() bool { return i8Asm }

// U8Scale returns the scale and its inverse that quantize values in
// [0, top] to 0..255: x ~ q * scale, q = QuantizeU8's rounding of x * inv.
// Both are 0 when top is not positive (every value quantizes to 0).
func U8Scale(top float32) (scale, inv float32) {
	if !(top > 0) || math.IsInf(float64(top), 1) {
		return 0, 0
	}
	return top / 255, 255 / top
}

// QuantizeU8 sets dst[i] to src[i]*inv rounded half up and clamped to
// 0..255 (NaN to 0), for each i of src; dst must be at least as long.
func QuantizeU8(dst []uint8, src []float32, inv float32) {
	_ = dst[:len(src)]
	quantU8(dst, src, inv)
}

// QuantizeRowsU8 quantizes each of rows rows of src (cols floats each,
// row i at src[i*lds:], of any sign) with a scale and zero point of its
// own, for A rows of GemmPackedBiasI8: with lo and hi the row's extremes
// and 0, scales[i] and inv are U8Scale(hi - lo), zeros[i] = z =
// min(-lo*inv + 0.5, 255) truncated (0 when the scale is), and
// dst[i*ldd+j] is src's x*inv +
// (z + 0.5) clamped to 0..255 (NaN to 0) and truncated, so that x ~
// (q - z) * scale.
func QuantizeRowsU8(dst []uint8, ldd int, src []float32, lds, rows, cols int, scales []float32, zeros []int32) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = dst[(rows-1)*ldd+cols-1]
	_ = src[(rows-1)*lds+cols-1]
	_, _ = scales[rows-1], zeros[rows-1]
	quantRowsU8(dst, ldd, src, lds, rows, cols, scales, zeros)
}

// quantRowsU8Go is the portable definition of QuantizeRowsU8.
func quantRowsU8Go(dst []uint8, ldd int, src []float32, lds, rows, cols int, scales []float32, zeros []int32) {
	for i := 0; i < rows; i++ {
		row := src[i*lds : i*lds+cols]
		var lo, hi float32
		for _, v := range row {
			lo, hi = min(lo, v), max(hi, v)
		}
		s, inv := U8Scale(hi - lo)
		var z int32
		if inv > 0 {
			z = int32(min(float32(-lo*inv)+0.5, 255))
		}
		scales[i], zeros[i] = s, z
		off := float32(z) + 0.5
		q := dst[i*ldd : i*ldd+cols]
		for j, x := range row {
			f := float32(x*inv) + off
			if !(f > 0) {
				f = 0
			}
			if f > 255 {
				f = 255
			}
			q[j] = uint8(int32(f))
		}
	}
}

// quantU8Go is the portable definition of QuantizeU8.
func quantU8Go(dst []uint8, src []float32, inv float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		f := float32(x*inv) + 0.5
		if !(f > 0) {
			f = 0
		}
		if f > 255 {
			f = 255
		}
		dst[i] = uint8(int32(f))
	}
}

// GemmPackedBiasI8 computes C = (A*B) scaled + bias, then max(C, 0) if
// relu, from A quantized to uint8 and B packed by NewPackedI8:
// C[i, j] = float32(sum over p of (a[i*lda+p] - z_i)*q[p, j]) *
// aScale[i*aStride] * scale[j] + bias[j], with z_i = aZero[i*zStride].
//   - A is m x k, row i at a[i*lda:]; aZero nil means no zero points (A
//     non-negative).
//   - Rows may overlap (lda < k: a convolution's input read as its own
//     im2col matrix), and a stride may be 0 (one scale or zero point for
//     every row).
//   - Each row is read for k rounded up to a multiple of 4 bytes (those
//     past k meet zero weights), so a must hold that many past the last
//     row's start.
//   - tile must hold at least 12*32 floats (for edge panels); it allocates
//     nothing.
func GemmPackedBiasI8(m int, a []uint8, lda int, aScale []float32, aStride int, aZero []int32, zStride int, b *PackedI8, bias []float32, relu bool, c []float32, ldc int, tile []float32) {
	if len(bias) < b.n {
		panic(fmt.Sprintf("sgemm: bias of %d floats for %d columns", len(bias), b.n))
	}
	gemmI8(m, a, lda, aScale, aStride, aZero, zStride, b, bias, 0, relu, c, ldc, tile)
}

// GemmPackedAccI8 is GemmPackedBiasI8 accumulating into C: C = C + (A*B)
// scaled, then max(C, 0) if relu, with no zero points (A non-negative):
// the sum of several products into one C (a convolution's taps).
func GemmPackedAccI8(m int, a []uint8, lda int, aScale []float32, aStride int, aZero []int32, zStride int, b *PackedI8, relu bool, c []float32, ldc int, tile []float32) {
	gemmI8(m, a, lda, aScale, aStride, aZero, zStride, b, c, ldc, relu, c, ldc, tile)
}

// gemmI8 computes C = base + (A*B) scaled, then max(C, 0) if relu, base
// row i at base[i*bs:].
func gemmI8(m int, a []uint8, lda int, aScale []float32, aStride int, aZero []int32, zStride int, b *PackedI8, base []float32, bs int, relu bool, c []float32, ldc int, tile []float32) {
	k, n := b.k, b.n
	if aZero == nil {
		aZero, zStride = noZero[:], 0
	}
	switch {
	case m < 0 || lda < 0 || aStride < 0 || zStride < 0:
		panic(fmt.Sprintf("sgemm: bad int8 GEMM dimensions: m %d, lda %d, scale stride %d, zero point stride %d", m, lda, aStride, zStride))
	case m == 0 || n == 0:
		return
	case len(a) < (m-1)*lda+4*b.kq:
		panic(fmt.Sprintf("sgemm: A has %d bytes, need %d", len(a), (m-1)*lda+4*b.kq))
	case len(aScale) < (m-1)*aStride+1:
		panic(fmt.Sprintf("sgemm: %d row scales for %d rows at stride %d", len(aScale), m, aStride))
	case len(aZero) < (m-1)*zStride+1:
		panic(fmt.Sprintf("sgemm: %d zero points for %d rows at stride %d", len(aZero), m, zStride))
	case len(tile) < i8MR*i8NR:
		panic(fmt.Sprintf("sgemm: tile of %d floats, need %d", len(tile), i8MR*i8NR))
	}
	checkMat("C", false, m, n, c, ldc)
	_ = k
	for jp := 0; jp*i8NR < n; jp++ {
		bp := b.panel(jp)
		j0 := jp * i8NR
		w := min(i8NR, n-j0)
		cols := i8NR
		if w <= i8NR/2 {
			cols = i8NR / 2
		}
		sw, cs := b.scale[j0:j0+cols], b.sum[j0:j0+cols]
		for i0 := 0; i0 < m; {
			h := m - i0
			rows := 1
			switch {
			case h >= 12:
				rows = 12
			case h >= 8:
				rows = 8
			case h >= 4:
				rows = 4
			}
			ar, sa, za := a[i0*lda:], aScale[i0*aStride:], aZero[i0*zStride:]
			if w == cols {
				kernI8(rows, cols, b.kq, ar, lda, bp, c[i0*ldc+j0:], ldc, sa, aStride, za, zStride, sw, cs, base[i0*bs+j0:], bs, relu)
				i0 += rows
				continue
			}
			kernI8(rows, cols, b.kq, ar, lda, bp, tile, i8NR, sa, aStride, za, zStride, sw, cs, zeroRow[:cols], 0, false)
			for i := 0; i < rows; i++ {
				dst := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+w]
				storeTileRow(dst, tile[i*i8NR:i*i8NR+w], base[(i0+i)*bs+j0:], relu)
			}
			i0 += rows
		}
	}
}

// noZero is the zero point of rows that have none.
var noZero [1]int32

// kernI8Go computes a rows x cols tile (cols <= 32) of C from uint8 rows of
// A (row i at a[i*lda:], kq groups of 4) and a packed panel of B, as
// GemmPackedBiasI8 defines it (scale of row i: sa[i*sas], zero point
// za[i*zas]; column scales sw and sums cs: one row each; the base the
// result is added to, row i at bias[i*bs:]: the bias with bs 0, or C itself
// to accumulate). It is the portable definition of the assembly kernels.
func kernI8Go(rows, cols, kq int, a []uint8, lda int, b []int8, c []float32, ldc int, sa []float32, sas int, za []int32, zas int, sw []float32, cs []int32, bias []float32, bs int, relu bool) {
	b = b[:kq*i8NR*4]
	for i := 0; i < rows; i++ {
		ar := a[i*lda : i*lda+4*kq]
		var acc [i8NR]int32
		for q := 0; q < kq; q++ {
			a4 := ar[4*q : 4*q+4]
			bq := b[q*i8NR*4 : (q+1)*i8NR*4]
			for j := 0; j < cols; j++ {
				bj := bq[4*j : 4*j+4]
				acc[j] += int32(a4[0])*int32(bj[0]) + int32(a4[1])*int32(bj[1]) +
					int32(a4[2])*int32(bj[2]) + int32(a4[3])*int32(bj[3])
			}
		}
		s, z := sa[i*sas], za[i*zas]
		r := c[i*ldc : i*ldc+cols]
		base := bias[i*bs : i*bs+cols]
		for j := range r {
			v := float32(float32(acc[j]-z*cs[j]) * s)
			v = float32(v * sw[j])
			v += base[j]
			if relu && v < 0 {
				v = 0
			}
			r[j] = v
		}
	}
}
