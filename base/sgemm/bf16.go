package sgemm

import (
	"math"
	"unsafe"
)

// The bf16 path: GemmPackedBiasBF16 is GemmPackedBias with both inputs
// rounded to bfloat16 (8 significant bits; Kalamkar et al., "A study of
// BFLOAT16 for deep learning training", arXiv:1905.12322) and products
// accumulated in float32, the arithmetic of the AVX512_BF16 instruction
// VDPBF16PS, which does twice the multiply-adds of VFMADD231PS per
// instruction. B (the weights) is converted once by NewPackedBF16; A (the
// activations) is converted per call into the caller's workspace.
//
// Every output element is computed the same way on every path: for each
// block of bf16KC values of k, acc = 0; for each pair (p, p+1) of k,
// acc += a[p+1]*b[p+1], then acc += a[p]*b[p], each addition rounded to
// float32 (the order VDPBF16PS specifies; the products of two bf16 values
// are exact in float32); then C = base + acc, base being the bias for the
// first block and C after. So the portable Go kernel gives the same bits as
// the assembly one, for values whose products and partial sums are normal
// floats (the instruction flushes subnormal results to zero; Go does not).
const (
	bf16KC = 512 // k values per block: a 32-column B panel of 256 pairs is 32 KiB
	bf16MR = 12
	bf16NR = 32
	bf16MC = mcMul * bf16MR // rows of A converted at a time
)

// PackedBF16 is a k x n matrix B rounded to bfloat16 and packed for
// GemmPackedBiasBF16. It is read-only after NewPackedBF16 and safe for
// concurrent use.
type PackedBF16 struct {
	k, n int
	// data holds, for each bf16KC block of rows (pc), for each 32-column
	// panel, for each pair of rows (2q, 2q+1) of the block, 32 words: bf16
	// of row 2q in the low half, of row 2q+1 (zero past k) in the high
	// half; columns past n are zero.
	data []uint32
}

// K returns the inner dimension of the packed matrix.
func (p *PackedBF16) K() int { return p.k }

// N returns the number of columns of the packed matrix.
func (p *PackedBF16) N() int { return p.n }

// NewPackedBF16 rounds op(B), a k x n matrix (B is k x n with row stride
// ldb, or n x k when transB), to bfloat16 and packs it.
func NewPackedBF16(transB bool, k, n int, b []float32, ldb int) *PackedBF16 {
	return packBF16Into(nil, transB, k, n, b, ldb)
}

// packBF16Into is NewPackedBF16 reusing p's storage when it is large
// enough (p may be nil).
func packBF16Into(p *PackedBF16, transB bool, k, n int, b []float32, ldb int) *PackedBF16 {
	checkMat("B", transB, k, n, b, ldb)
	if p == nil {
		p = &PackedBF16{}
	}
	size := bf16PanelWords(k, n)
	if cap(p.data) < size {
		p.data = make([]uint32, size)
	}
	p.k, p.n, p.data = k, n, p.data[:size]
	packBF16(p, transB, b, ldb)
	return p
}

// bf16PanelWords is the number of words of a packed block of kb rows and
// nb columns of B in the bf16 layout.
func bf16PanelWords(kb, nb int) int { return (kb + 1) / 2 * ((nb + bf16NR - 1) / bf16NR) * bf16NR }

// packBF16 fills p.data (sized for p.k x p.n) with op(B) rounded to
// bfloat16 (B is p.k x p.n with row stride ldb, or p.n x p.k when transB).
func packBF16(p *PackedBF16, transB bool, b []float32, ldb int) {
	k, n := p.k, p.n
	np := (n + bf16NR - 1) / bf16NR
	at := func(r, j int) uint32 {
		if r >= k {
			return 0
		}
		if transB {
			return uint32(ToBF16(b[j*ldb+r]))
		}
		return uint32(ToBF16(b[r*ldb+j]))
	}
	for pc := 0; pc < k; pc += bf16KC {
		kp := (min(bf16KC, k-pc) + 1) / 2
		for jp := 0; jp < np; jp++ {
			d := p.panel(pc, kp, jp)
			for q := 0; q < kp; q++ {
				for jj := 0; jj < bf16NR; jj++ {
					var v uint32
					if j := jp*bf16NR + jj; j < n {
						v = at(pc+2*q, j) | at(pc+2*q+1, j)<<16
					}
					d[q*bf16NR+jj] = v
				}
			}
		}
	}
}

// panel returns the packed panel jp of the block of rows from pc, which
// holds kp pairs.
func (p *PackedBF16) panel(pc, kp, jp int) []uint32 {
	np := (p.n + bf16NR - 1) / bf16NR
	off := pc/2*np*bf16NR + jp*kp*bf16NR
	return p.data[off : off+kp*bf16NR]
}

// ToBF16 rounds x to bfloat16 (the upper 16 bits of a float32) the way
// VCVTNE2PS2BF16 does: to nearest, ties to even; subnormals become zero of
// the same sign; NaNs stay NaN (quiet).
func ToBF16(x float32) uint16 {
	u := math.Float32bits(x)
	switch {
	case u&0x7f800000 == 0: // zero or subnormal
		return uint16(u>>16) & 0x8000
	case u&0x7fffffff > 0x7f800000: // NaN
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// FromBF16 returns the float32 value of a bfloat16.
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// WorkSizeBF16 is the number of float32s of workspace GemmPackedBiasBF16
// needs: a block of A in bf16 and a scratch tile.
func WorkSizeBF16() int { return bf16MC*bf16KC/2 + bf16MR*bf16NR }

// BF16Native reports whether GemmPackedBiasBF16 runs on the AVX512_BF16
// instructions; otherwise it runs portable Go (same results, much slower),
// and callers wanting speed should stay with the float32 path.
func BF16Native() bool { return bf16Asm }

// GemmPackedBiasBF16 is GemmPackedBias with A and B rounded to bfloat16 and
// float32 accumulation: C = bf16(A)*B + bias, then max(C, 0) if relu, where
// A is m x k (row stride lda; rows may overlap, lda < k, as for a
// convolution's input read as its own im2col matrix) and B was packed by
// NewPackedBF16. work must have at least WorkSizeBF16() elements;
// GemmPackedBiasBF16 then allocates nothing. Non-finite values in A may
// spoil neighbouring outputs (a padding product 0*Inf is NaN).
func GemmPackedBiasBF16(m int, a []float32, lda int, b *PackedBF16, bias []float32, relu bool, c []float32, ldc int, work []float32) {
	if biasTrivial(m, b.k, b.n, a, lda, bias, relu, c, ldc, work, WorkSizeBF16()) {
		return
	}
	gemmBF16(m, a, lda, b, bias, relu, c, ldc, work)
}

// gemmBF16 is GemmPackedBiasBF16 on checked arguments, except that a nil
// bias makes the result C + bf16(A)*B.
func gemmBF16(m int, a []float32, lda int, b *PackedBF16, bias []float32, relu bool, c []float32, ldc int, work []float32) {
	k, n := b.k, b.n
	nA := bf16MC * bf16KC / 2
	abuf := unsafe.Slice((*uint16)(unsafe.Pointer(&work[0])), 2*nA)
	tile := work[nA : nA+bf16MR*bf16NR]
	for pc := 0; pc < k; pc += bf16KC {
		kb := min(bf16KC, k-pc)
		var bb []float32
		if pc == 0 && bias != nil {
			bb = bias[:n] // first block: bias + A*B; later blocks accumulate
		}
		for ic := 0; ic < m; ic += bf16MC {
			mb := min(bf16MC, m-ic)
			a16, ld16 := convertA(a[ic*lda+pc:], lda, mb, kb, abuf)
			macroBF16(mb, n, (kb+1)/2, a16, ld16, b, pc, c[ic*ldc:], ldc, tile, bb, relu && pc+kb == k)
		}
	}
}

// convertA rounds rows 0..mb of A (kb values each, row i at a[i*lda:]) to
// bf16 in buf and returns them with their row stride. Rows up to mb rounded
// up to a multiple of 4 and one value past each row's end are readable (the
// kernels read 4, 8 or 12 rows, and pairs along k); what is not A there is
// zero, or for overlapping rows (lda < kb) the next row's values, which
// meet zero weights. When the rows overlap or leave gaps shorter than a
// row, the whole span is converted at once, keeping the stride (with a gap,
// only for even kb, so that no gap value is ever multiplied); otherwise
// each row is converted to a compact row of even length.
func convertA(a []float32, lda, mb, kb int, buf []uint16) ([]uint16, int) {
	rows := (mb + 3) &^ 3
	span := (mb-1)*lda + kb
	end := (rows-1)*lda + kb + 1
	if end <= len(buf) && (lda <= kb || lda < 2*kb && kb%2 == 0) {
		toBF16(buf[:span], a[:span])
		clear(buf[span:end])
		return buf[:end], lda
	}
	ld := (kb + 1) &^ 1
	for i := 0; i < mb; i++ {
		row := buf[i*ld : (i+1)*ld]
		toBF16(row[:kb], a[i*lda:i*lda+kb])
		if kb < ld {
			row[kb] = 0
		}
	}
	clear(buf[mb*ld : rows*ld])
	return buf[:rows*ld], ld
}

// macroBF16 computes C (mb x n) from bf16 rows of A (row stride ld, kp
// pairs) and the block of B starting at row pc; like macroStrided, with
// bias the result is bias + A*B, else C + A*B, clamped at 0 if relu. Edge
// tiles go through tile (bf16MR x bf16NR floats).
func macroBF16(mb, n, kp int, a []uint16, ld int, b *PackedBF16, pc int, c []float32, ldc int, tile []float32, bias []float32, relu bool) {
	for jp := 0; jp*bf16NR < n; jp++ {
		bp := b.panel(pc, kp, jp)
		j0 := jp * bf16NR
		w := min(bf16NR, n-j0)
		cols := bf16NR
		if w <= bf16NR/2 {
			cols = bf16NR / 2
		}
		var bj []float32 // this panel's bias
		if bias != nil {
			bj = bias[j0 : j0+w]
		}
		for i0 := 0; i0 < mb; {
			h := mb - i0
			rows := 4
			if h >= bf16MR {
				rows = bf16MR
			} else if h >= 8 {
				rows = 8
			}
			ar := a[i0*ld:]
			if h >= rows && w == cols {
				kernBF16(rows, cols, kp, ar, ld, bp, c[i0*ldc+j0:], ldc, bj, relu)
				i0 += rows
				continue
			}
			h = min(h, rows)
			kernBF16(rows, cols, kp, ar, ld, bp, tile, bf16NR, zeroRow[:cols], false)
			for i := 0; i < h; i++ {
				dst := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+w]
				base := dst
				if bj != nil {
					base = bj
				}
				storeTileRow(dst, tile[i*bf16NR:i*bf16NR+w], base, relu)
			}
			i0 += h
		}
	}
}

// kernBF16Go computes a rows x cols tile (cols <= 32) of C from bf16 rows of
// A (row i at a[i*lda:], kp pairs) and a packed panel of B: C = base +
// A*B, base being bias (one row) when not nil, else C; clamped at 0 if
// relu. It is the portable definition of the assembly kernels.
func kernBF16Go(rows, cols, kp int, a []uint16, lda int, b []uint32, c []float32, ldc int, bias []float32, relu bool) {
	b = b[:kp*bf16NR]
	for i := 0; i < rows; i++ {
		ar := a[i*lda : i*lda+2*kp]
		var acc [bf16NR]float32
		for q := 0; q < kp; q++ {
			a0, a1 := FromBF16(ar[2*q]), FromBF16(ar[2*q+1])
			bq := b[q*bf16NR : q*bf16NR+cols]
			for j, w := range bq {
				s := acc[j] + a1*FromBF16(uint16(w>>16))
				acc[j] = s + a0*FromBF16(uint16(w))
			}
		}
		r := c[i*ldc : i*ldc+cols]
		base := r
		if bias != nil {
			base = bias[:cols]
		}
		for j := range r {
			v := base[j] + acc[j]
			if relu && v < 0 {
				v = 0
			}
			r[j] = v
		}
	}
}

// toBF16Go rounds src to bf16 into dst (the same length).
func toBF16Go(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = ToBF16(v)
	}
}

// NewPackedBF16From rounds a matrix packed for the float32 path to bfloat16
// and packs it for GemmPackedBiasBF16 (for weights whose float32 form was
// prepared, e.g. with batch norm folded in, before bf16 was chosen).
func NewPackedBF16From(p *PackedB) *PackedBF16 {
	return NewPackedBF16(false, p.k, p.n, p.Dense(), p.n)
}

// Dense returns the matrix unpacked: k x n, row stride n.
func (p *PackedB) Dense() []float32 {
	nr := kern.nr
	b := make([]float32, p.k*p.n)
	for pc := 0; pc < p.k; pc += kcBlock {
		kb := min(kcBlock, p.k-pc)
		for jp := 0; jp*nr < p.n; jp++ {
			panel := p.panel(pc, kb, jp)
			for r := 0; r < kb; r++ {
				for j := jp * nr; j < min(p.n, (jp+1)*nr); j++ {
					b[(pc+r)*p.n+j] = panel[r*nr+j-jp*nr]
				}
			}
		}
	}
	return b
}
