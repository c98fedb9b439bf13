// Package sgemm is a fast single-precision general matrix multiply for
// row-major matrices, used by the inference engine (model/engine) and by the
// training graph's custom operations.
//
// It follows the classic Goto/BLIS design (Goto & van de Geijn, "Anatomy of
// high-performance matrix multiplication", ACM TOMS 2008): B is packed into
// kc x nr column panels, A into mr x kc row panels, and a register-blocked
// micro-kernel computes one mr x nr tile of C from one A panel and one B
// panel. The micro-kernel is Go assembly for AVX-512 (12 x 32 tile) or
// AVX2+FMA (6 x 16 tile) when the CPU and OS support them (detected at start
// with golang.org/x/sys/cpu; AVX-512 is never assumed), and portable Go
// otherwise (and always with the purego build tag). The panels are packed
// by AVX2 assembly where the CPU has it (pack_amd64.s: transposes in
// registers, alpha and the bfloat16 rounding in the same pass), by the Go
// packers otherwise; both write the same bits.
//
// Entry points:
//   - Gemm: C = alpha*op(A)*op(B) + beta*C for any shapes.
//   - NewPackedB and GemmPacked: B packed once (e.g. layer weights at load
//     time) and reused; GemmPacked allocates nothing when given a workspace
//     of WorkSize floats.
//   - Transpose: B = A^T with leading dimensions (8 x 8 blocks in AVX2).
//
// All routines panic on slices too short for the stated shapes, like the
// reference BLAS: that is a programming error, not a data error.
package sgemm

//go:generate go run gen_kernels.go

import (
	"fmt"
	"sync"
)

// Cache blocking: a packed A block is mc x kc (fits L2), a packed B micro
// panel kc x nr (fits L1).
const (
	kcBlock = 256
	mcMul   = 8 // mc = mcMul * 12 rows for the AVX-512 kernel, etc.
	ncBlock = 1536
)

// kernelSpec is the active micro-kernel.
type kernelSpec struct {
	name string
	mr   int
	nr   int
	// run computes C[0:mr, 0:nr] = base + A*B where a is a packed mr-row
	// panel (a[p*mr+i]), b a packed nr-column panel (b[p*nr+j]), over k
	// steps, and c points at C[0,0] with row stride ldc; base is C itself,
	// or the row bias (nr floats, the same for every row; C is then not
	// read) when bias is not nil.
	run func(k int, a, b []float32, c []float32, ldc int, bias []float32)
	// runS is run with A unpacked: row i of the tile at a[i*lda:]; with
	// relu it stores max(C + A*B, 0).
	runS stridedKernel
	// edges are strided kernels for fewer rows than mr (largest first),
	// used for the last rows of C.
	edges []edgeKernel
	// narrow, if set, is runS for the left nr/2 columns of a panel only.
	narrow stridedKernel
}

// edgeKernel is a strided micro-kernel for a rows x nr tile.
type edgeKernel struct {
	rows int
	run  stridedKernel
}

// stridedKernel computes an r x nr (narrow: nr/2) tile C = base + A*B with
// A unpacked (row i at a[i*lda:]) and B a packed panel, where base is C
// itself, or the row bias (the same for every row) when bias is not nil;
// with relu the stored result is max(C, 0).
type stridedKernel func(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool)

// Kernel returns the name of the micro-kernel in use ("avx512", "avx2" or
// "generic") and its tile size mr x nr.
func Kernel() (name string, mr, nr int) {
	return kern.name, kern.mr, kern.nr
}

func mcBlock() int { return mcMul * kern.mr }

// Largest tile of any kernel: workspaces are sized for it, so that they stay
// valid whichever kernel runs (tests switch kernels).
const (
	maxMR = 12
	maxNR = 32
)

// WorkSize is the number of float32s of workspace GemmPacked needs (one packed
// block of A plus a scratch tile).
func WorkSize() int { return mcMul*maxMR*kcBlock + maxMR*maxNR }

// PackedB is a k x n matrix B packed for the active micro-kernel. It is
// read-only after NewPackedB and safe for concurrent use.
type PackedB struct {
	k, n int
	// data holds, for each kc block of rows (pc), for each nr panel of
	// columns, kb*nr floats (columns past n are zero).
	data []float32
	// bf16 is set when the values were rounded to bfloat16
	// (PackBIntoBF16): GemmPacked then rounds A too.
	bf16 bool
	// b16 is the same matrix packed for the bf16 kernels, when
	// PackBIntoBF16 ran with them (bf16Kernels).
	b16 *PackedBF16
}

// K returns the inner dimension of the packed matrix.
func (p *PackedB) K() int { return p.k }

// N returns the number of columns of the packed matrix.
func (p *PackedB) N() int { return p.n }

// NewPackedB packs op(B), a k x n matrix (B is k x n with row stride ldb, or
// n x k when transB).
func NewPackedB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	return PackBInto(nil, transB, k, n, b, ldb)
}

// PackBInto is NewPackedB reusing p's storage when it is large enough (p
// may be nil), so that a matrix that changes every step (a weight being
// trained) is packed without allocating. It returns the packed matrix.
func PackBInto(p *PackedB, transB bool, k, n int, b []float32, ldb int) *PackedB {
	return packBInto(p, transB, k, n, b, ldb, false)
}

// packBInto is PackBInto, rounding every value to bfloat16 if round.
func packBInto(p *PackedB, transB bool, k, n int, b []float32, ldb int, round bool) *PackedB {
	checkMat("B", transB, k, n, b, ldb)
	nr := kern.nr
	np := (n + nr - 1) / nr
	if p == nil {
		p = &PackedB{}
	}
	if cap(p.data) < k*np*nr {
		p.data = make([]float32, k*np*nr)
	}
	p.k, p.n, p.data, p.bf16, p.b16 = k, n, p.data[:k*np*nr], round, nil
	off := 0
	for pc := 0; pc < k; pc += kcBlock {
		kb := min(kcBlock, k-pc)
		packB(transB, b, ldb, pc, kb, 0, n, p.data[off:off+kb*np*nr], round)
		off += kb * np * nr
	}
	return p
}

// panel returns the packed B panel for rows pc..pc+kb and panel index jp.
func (p *PackedB) panel(pc, kb, jp int) []float32 {
	nr := kern.nr
	np := (p.n + nr - 1) / nr
	off := pc*np*nr + jp*kb*nr
	return p.data[off : off+kb*nr]
}

// packBGo packs rows pc..pc+kb and columns jc..jc+nb of op(B) into nr-wide
// panels: dst[jp*kb*nr + p*nr + j], each value rounded to bfloat16 if
// round. It is packB on the portable build and packB's reference.
func packBGo(transB bool, b []float32, ldb, pc, kb, jc, nb int, dst []float32, round bool) {
	nr := kern.nr
	for jp := 0; jp*nr < nb; jp++ {
		d := dst[jp*kb*nr : (jp+1)*kb*nr]
		j0 := jc + jp*nr
		w := min(nr, jc+nb-j0)
		if !transB {
			for p := 0; p < kb; p++ {
				row := b[(pc+p)*ldb+j0 : (pc+p)*ldb+j0+w]
				dp := d[p*nr : p*nr+nr]
				copy(dp, row)
				clear(dp[w:])
			}
		} else {
			// op(B)[p][j] = B[j][p], four rows of B at a time so that each
			// write fills four consecutive floats.
			j := 0
			for ; j+4 <= w; j += 4 {
				r0 := b[(j0+j)*ldb+pc:][:kb]
				r1 := b[(j0+j+1)*ldb+pc:][:kb]
				r2 := b[(j0+j+2)*ldb+pc:][:kb]
				r3 := b[(j0+j+3)*ldb+pc:][:kb]
				for p := range r0 {
					dp := d[p*nr+j : p*nr+j+4 : p*nr+j+4]
					dp[0], dp[1], dp[2], dp[3] = r0[p], r1[p], r2[p], r3[p]
				}
			}
			for ; j < w; j++ {
				row := b[(j0+j)*ldb+pc : (j0+j)*ldb+pc+kb]
				for p, v := range row {
					d[p*nr+j] = v
				}
			}
			if w < nr {
				for p := 0; p < kb; p++ {
					clear(d[p*nr+w : p*nr+nr])
				}
			}
		}
		if round {
			roundBF16(d)
		}
	}
}

// packAGo packs rows ic..ic+mb and columns pc..pc+kb of alpha*op(A) into
// mr-tall panels: dst[ip*kb*mr + p*mr + i]; rows past mb are zero. With
// round, each value (alpha times an element of A) is rounded to bfloat16.
// It is packA on the portable build and packA's reference.
func packAGo(transA bool, a []float32, lda, ic, mb, pc, kb int, alpha float32, dst []float32, round bool) {
	mr := kern.mr
	for ip := 0; ip*mr < mb; ip++ {
		d := dst[ip*kb*mr : (ip+1)*kb*mr]
		i0 := ic + ip*mr
		h := min(mr, ic+mb-i0)
		if !transA {
			for i := 0; i < h; i++ {
				row := a[(i0+i)*lda+pc : (i0+i)*lda+pc+kb]
				if alpha == 1 {
					for p, v := range row {
						d[p*mr+i] = v
					}
				} else {
					for p, v := range row {
						d[p*mr+i] = alpha * v
					}
				}
			}
		} else {
			// op(A)[i][p] = A[p][i]
			for p := 0; p < kb; p++ {
				row := a[(pc+p)*lda+i0 : (pc+p)*lda+i0+h]
				dp := d[p*mr : p*mr+h]
				if alpha == 1 {
					copy(dp, row)
				} else {
					for i, v := range row {
						dp[i] = alpha * v
					}
				}
			}
		}
		if h < mr {
			for p := 0; p < kb; p++ {
				clear(d[p*mr+h : p*mr+mr])
			}
		}
		if round {
			roundBF16(d)
		}
	}
}

// scaleC sets C = beta*C over m x n.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
		} else {
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

// macro multiplies a packed A block (mb x kb) by a packed B block (kb x nb,
// panels from bpanel) and adds the result into C (mb x nb at c, row stride
// ldc), or, with store, writes it there without reading C (the first k
// block of a GEMM with beta 0). tile is mr*nr scratch for edge tiles.
func macro(mb, nb, kb int, apack []float32, bpanel func(jp int) []float32, c []float32, ldc int, tile []float32, store bool) {
	mr, nr := kern.mr, kern.nr
	var bias []float32 // full tiles: nil accumulates into C, zeros overwrite it
	if store {
		bias = zeroRow[:nr]
	}
	for jp := 0; jp*nr < nb; jp++ {
		bp := bpanel(jp)
		j0 := jp * nr
		w := min(nr, nb-j0)
		for ip := 0; ip*mr < mb; ip++ {
			ap := apack[ip*kb*mr : (ip+1)*kb*mr]
			i0 := ip * mr
			h := min(mr, mb-i0)
			if h == mr && w == nr {
				kern.run(kb, ap, bp, c[i0*ldc+j0:], ldc, bias)
				continue
			}
			kern.run(kb, ap, bp, tile, nr, zeroRow[:nr]) // tile = A*B
			for i := 0; i < h; i++ {
				dst := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+w]
				src := tile[i*nr : i*nr+w]
				if store {
					copy(dst, src)
					continue
				}
				for j, v := range src {
					dst[j] += v
				}
			}
		}
	}
}

// checkMat panics if x cannot hold op(X), rows x cols with stride ld.
func checkMat(name string, trans bool, rows, cols int, x []float32, ld int) {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("sgemm: negative dimension for %s: %d x %d", name, rows, cols))
	}
	r, c := rows, cols
	if trans {
		r, c = cols, rows
	}
	if r == 0 || c == 0 {
		return
	}
	if ld < c {
		panic(fmt.Sprintf("sgemm: %s leading dimension %d < %d", name, ld, c))
	}
	if need := (r-1)*ld + c; len(x) < need {
		panic(fmt.Sprintf("sgemm: %s has %d elements, need %d", name, len(x), need))
	}
}

// GemmPacked computes C = alpha*op(A)*B + beta*C where op(A) is m x k (A is
// m x k with row stride lda, or k x m when transA) and B is packed (k x n).
// Rows of A may overlap (lda smaller than k), which lets a convolution's
// input serve as its own im2col matrix. work must have at least WorkSize()
// elements; GemmPacked then allocates nothing. When B was packed by
// PackBIntoBF16, the product is in bfloat16 arithmetic (GemmWorkBF16).
func GemmPacked(transA bool, m int, alpha float32, a []float32, lda int, b *PackedB, beta float32, c []float32, ldc int, work []float32) {
	gemmPacked(transA, m, alpha, a, lda, b, beta, c, ldc, work, false, b.bf16)
}

// gemmPacked is GemmPacked, with max(C, 0) stored if relu, and A rounded
// to bfloat16 as it is packed if roundA (else read in place when it can
// be).
func gemmPacked(transA bool, m int, alpha float32, a []float32, lda int, b *PackedB, beta float32, c []float32,
	ldc int, work []float32, relu, roundA bool) {
	k, n := b.k, b.n
	checkMatOverlap("A", transA, m, k, a, lda)
	checkMat("C", false, m, n, c, ldc)
	if len(work) < WorkSize() {
		panic(fmt.Sprintf("sgemm: workspace of %d floats, need %d", len(work), WorkSize()))
	}
	if m == 0 || n == 0 {
		return
	}
	if b.b16 != nil && !transA && alpha == 1 && !relu && k > 0 {
		gemmBF16Beta(m, a, lda, b.b16, beta, c, ldc, work)
		return
	}
	// With beta 0 the first k block stores A*B without reading C: no
	// clearing pass, and NaNs in the old C do not reach the result.
	store := storesFirst(k, alpha, beta)
	if !store {
		scaleC(m, n, beta, c, ldc)
	}
	if k == 0 || alpha == 0 {
		if relu {
			reluC(m, n, c, ldc)
		}
		return
	}
	mc := mcBlock()
	apack := work[:mc*kcBlock]
	tile := work[mcMul*maxMR*kcBlock : mcMul*maxMR*kcBlock+kern.mr*kern.nr]
	if !transA && alpha == 1 && !roundA {
		// A read in place by the strided kernel: no packing. Columns go
		// in blocks of ncBlock, the length of the zero row the first k
		// block stores with.
		for pc := 0; pc < k; pc += kcBlock {
			kb := min(kcBlock, k-pc)
			for jc := 0; jc < n; jc += ncBlock {
				nb, jp0 := min(ncBlock, n-jc), jc/kern.nr
				bpanel := func(jp int) []float32 { return b.panel(pc, kb, jp0+jp) }
				var bias []float32
				if store && pc == 0 {
					bias = zeroRow[:nb]
				}
				for ic := 0; ic < m; ic += mc {
					mb := min(mc, m-ic)
					macroStrided(mb, nb, kb, a[ic*lda+pc:], lda, bpanel, c[ic*ldc+jc:], ldc, tile, apack, bias,
						relu && pc+kb == k)
				}
			}
		}
		return
	}
	for pc := 0; pc < k; pc += kcBlock {
		kb := min(kcBlock, k-pc)
		bpanel := func(jp int) []float32 { return b.panel(pc, kb, jp) }
		for ic := 0; ic < m; ic += mc {
			mb := min(mc, m-ic)
			packA(transA, a, lda, ic, mb, pc, kb, alpha, apack, roundA)
			macro(mb, n, kb, apack, bpanel, c[ic*ldc:], ldc, tile, store && pc == 0)
		}
	}
	if relu {
		reluC(m, n, c, ldc)
	}
}

// reluC sets C = max(C, 0).
func reluC(m, n int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j, v := range row {
			if v < 0 {
				row[j] = 0
			}
		}
	}
}

// macroStrided multiplies A (m x kb, row i at a[i*lda:], unpacked) by a
// packed B block (kb x n) and adds into C, or, when bias is not nil, stores
// bias (one row of n floats, broadcast over rows) + A*B; with relu the final
// values are clamped at 0. Edge tiles go through tile (mr*nr) and, for the
// last rows, a zero-padded copy of A in abuf (at least mr*kb).
func macroStrided(m, n, kb int, a []float32, lda int, bpanel func(jp int) []float32, c []float32, ldc int, tile,
	abuf []float32, bias []float32, relu bool) {
	mr, nr := kern.mr, kern.nr
	for jp := 0; jp*nr < n; jp++ {
		bp := bpanel(jp)
		j0 := jp * nr
		w := min(nr, n-j0)
		var bj []float32 // this panel's bias
		if bias != nil {
			bj = bias[j0 : j0+w]
		}
	rows:
		for i0 := 0; i0 < m; {
			h := min(mr, m-i0)
			if w == nr {
				if h == mr {
					kern.runS(kb, a[i0*lda:], lda, bp, c[i0*ldc+j0:], ldc, bj, relu)
					i0 += mr
					continue
				}
				for _, e := range kern.edges {
					if h >= e.rows {
						e.run(kb, a[i0*lda:], lda, bp, c[i0*ldc+j0:], ldc, bj, relu)
						i0 += e.rows
						continue rows
					}
				}
			}
			run := kern.runS
			if w <= nr/2 && kern.narrow != nil {
				run = kern.narrow
				if w == nr/2 && h == mr {
					run(kb, a[i0*lda:], lda, bp, c[i0*ldc+j0:], ldc, bj, relu)
					i0 += mr
					continue
				}
			}
			ap, ld := a[i0*lda:], lda
			if h < mr {
				// Copy the last rows, zero-padded to mr, row-major.
				for i := 0; i < mr; i++ {
					dst := abuf[i*kb : (i+1)*kb]
					if i < h {
						copy(dst, a[(i0+i)*lda:(i0+i)*lda+kb])
					} else {
						clear(dst)
					}
				}
				ap, ld = abuf, kb
			}
			clear(tile)
			run(kb, ap, ld, bp, tile, nr, nil, false)
			for i := 0; i < h; i++ {
				dst := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+w]
				base := dst
				if bj != nil {
					base = bj
				}
				storeTileRow(dst, tile[i*nr:i*nr+w], base, relu)
			}
			i0 += h
		}
	}
}

// GemmPackedBias computes C = A*B + bias, then max(C, 0) if relu, where A is
// m x k (row stride lda; rows may overlap, as for GemmPacked), B is packed
// (k x n) and bias (n floats) is added to every row. C's previous contents
// are never read: the bias goes straight into the micro-kernel's store,
// which saves a pass over C. work must have at least WorkSize() elements.
func GemmPackedBias(m int, a []float32, lda int, b *PackedB, bias []float32, relu bool, c []float32, ldc int, work []float32) {
	k, n := b.k, b.n
	if biasTrivial(m, k, n, a, lda, bias, relu, c, ldc, work, WorkSize()) {
		return
	}
	mc := mcBlock()
	apack := work[:mc*kcBlock]
	tile := work[mcMul*maxMR*kcBlock : mcMul*maxMR*kcBlock+kern.mr*kern.nr]
	for pc := 0; pc < k; pc += kcBlock {
		kb := min(kcBlock, k-pc)
		bpanel := func(jp int) []float32 { return b.panel(pc, kb, jp) }
		var bb []float32
		if pc == 0 {
			bb = bias[:n] // first block: bias + A*B; later blocks accumulate
		}
		for ic := 0; ic < m; ic += mc {
			mb := min(mc, m-ic)
			macroStrided(mb, n, kb, a[ic*lda+pc:], lda, bpanel, c[ic*ldc:], ldc, tile, apack, bb, relu && pc+kb == k)
		}
	}
}

// biasTrivial checks the arguments of a packed GEMM with bias (A m x k,
// C m x n, the workspace at least need floats) and does the products that
// need no kernel: none when m or n is 0, C = bias (then ReLU) when k is 0.
// It reports whether it did.
func biasTrivial(m, k, n int, a []float32, lda int, bias []float32, relu bool, c []float32, ldc int, work []float32, need int) bool {
	checkMatOverlap("A", false, m, k, a, lda)
	checkMat("C", false, m, n, c, ldc)
	if len(bias) < n {
		panic(fmt.Sprintf("sgemm: bias of %d floats for %d columns", len(bias), n))
	}
	if len(work) < need {
		panic(fmt.Sprintf("sgemm: workspace of %d floats, need %d", len(work), need))
	}
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			copy(c[i*ldc:i*ldc+n], bias)
		}
		if relu {
			reluC(m, n, c, ldc)
		}
		return true
	}
	return false
}

// checkMatOverlap is checkMat allowing overlapping rows (ld < cols) for an
// untransposed matrix.
func checkMatOverlap(name string, trans bool, rows, cols int, x []float32, ld int) {
	if trans || ld >= cols {
		checkMat(name, trans, rows, cols, x, ld)
		return
	}
	if rows < 0 || cols < 0 || ld < 0 {
		panic(fmt.Sprintf("sgemm: bad dimensions for %s: %d x %d, ld %d", name, rows, cols, ld))
	}
	if rows == 0 || cols == 0 {
		return
	}
	if need := (rows-1)*ld + cols; len(x) < need {
		panic(fmt.Sprintf("sgemm: %s has %d elements, need %d", name, len(x), need))
	}
}

// storeTileRow stores a row of an edge tile computed with a zero base:
// dst[j] = tile[j] + base[j], clamped at 0 if relu (dst may be base).
func storeTileRow(dst, tile, base []float32, relu bool) {
	base = base[:len(tile)]
	for j, v := range tile {
		v += base[j]
		if relu && v < 0 {
			v = 0
		}
		dst[j] = v
	}
}

// storesFirst reports whether a GEMM's first k block stores alpha*A*B
// into C instead of adding to beta*C (scaled first): with beta 0, when
// there is a product to store. BLAS semantics: C is then never read.
func storesFirst(k int, alpha, beta float32) bool { return beta == 0 && alpha != 0 && k > 0 }

// zeroRow is a read-only row of zeros: the "bias" of a first k block that
// overwrites C.
var zeroRow [ncBlock]float32

// buffers is one goroutine's packing space for Gemm.
type buffers struct {
	a, b, tile []float32
}

var pool = sync.Pool{New: func() any {
	return splitWork(make([]float32, GemmWorkSize()))
}}

// GemmWorkSize is the number of float32s of workspace GemmWork needs.
func GemmWorkSize() int {
	return mcMul*maxMR*kcBlock + kcBlock*(ncBlock+maxNR) + maxMR*maxNR
}

func splitWork(w []float32) *buffers {
	na := mcMul * maxMR * kcBlock
	nb := kcBlock * (ncBlock + maxNR)
	return &buffers{a: w[:na], b: w[na : na+nb], tile: w[na+nb : na+nb+maxMR*maxNR]}
}

// GemmWork is Gemm with caller-provided packing space (at least
// GemmWorkSize floats), for hot paths that must never allocate (Gemm's pool
// may allocate after a garbage collection or on a new thread).
func GemmWork(work []float32, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32,
	ldb int, beta float32, c []float32, ldc int) {
	checkGemmWork(work, transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	gemmBuf(splitWork(work), false, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkGemmWork panics on arguments of GemmWork that do not hold the
// stated shapes, or a workspace shorter than GemmWorkSize.
func checkGemmWork(work []float32, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	checkMat("A", transA, m, k, a, lda)
	checkMat("B", transB, k, n, b, ldb)
	checkMat("C", false, m, n, c, ldc)
	if len(work) < GemmWorkSize() {
		panic(fmt.Sprintf("sgemm: workspace of %d floats, need %d", len(work), GemmWorkSize()))
	}
}

// Gemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices, where
// op(A) is m x k (A is m x k with row stride lda, or k x m when transA),
// op(B) is k x n (B is k x n with row stride ldb, or n x k when transB) and
// C is m x n with row stride ldc. Packing buffers come from a pool, so
// steady-state calls do not allocate.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkMat("A", transA, m, k, a, lda)
	checkMat("B", transB, k, n, b, ldb)
	checkMat("C", false, m, n, c, ldc)
	gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	buf := pool.Get().(*buffers)
	gemmBuf(buf, false, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	pool.Put(buf)
}

// gemmBuf is the Goto loop nest over packed blocks of B and A; with round,
// both are rounded to bfloat16 as they are packed.
func gemmBuf(buf *buffers, round, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int,
	beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	// With beta 0 the first block of k stores A*B without reading C,
	// which saves clearing C first.
	strided := !transA && alpha == 1 && !round
	store := storesFirst(k, alpha, beta)
	if !store {
		scaleC(m, n, beta, c, ldc)
	}
	if k == 0 || alpha == 0 {
		return
	}
	mc, nr := mcBlock(), kern.nr
	for jc := 0; jc < n; jc += ncBlock {
		nb := min(ncBlock, n-jc)
		for pc := 0; pc < k; pc += kcBlock {
			kb := min(kcBlock, k-pc)
			bp := buf.b[:kb*((nb+nr-1)/nr)*nr]
			packB(transB, b, ldb, pc, kb, jc, nb, bp, round)
			bpanel := func(jp int) []float32 { return bp[jp*kb*nr : (jp+1)*kb*nr] }
			for ic := 0; ic < m; ic += mc {
				mb := min(mc, m-ic)
				if strided {
					// A read in place by the strided kernel: no packing.
					var bias []float32
					if store && pc == 0 {
						bias = zeroRow[:nb]
					}
					macroStrided(mb, nb, kb, a[ic*lda+pc:], lda, bpanel, c[ic*ldc+jc:], ldc, buf.tile, buf.a, bias, false)
					continue
				}
				packA(transA, a, lda, ic, mb, pc, kb, alpha, buf.a, round)
				macro(mb, nb, kb, buf.a, bpanel, c[ic*ldc+jc:], ldc, buf.tile, store && pc == 0)
			}
		}
	}
}
