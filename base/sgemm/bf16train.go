package sgemm

import (
	"math"
	"unsafe"
)

// bf16 arithmetic for training: GemmWorkBF16 and PackBIntoBF16 with
// GemmPacked are GemmWork and PackBInto with GemmPacked where both operands
// are rounded to bfloat16 (ToBF16) and the products summed in float32, the
// arithmetic of the bf16 path (bf16.go) for every shape a training step
// needs (transposed operands, alpha, beta).
//
// Two routes give it, equal up to the order of the float32 additions (the
// product of two bfloat16 values, 8 significant bits each, is exact in
// float32, so the float32 kernel on rounded operands computes the same
// products as VDPBF16PS):
//   - the bf16 kernels (VDPBF16PS) where the CPU has AVX512_BF16 and A is
//     read untransposed with alpha 1: A converted per block, B packed in
//     bf16 pairs;
//   - elsewhere, the float32 kernels on panels rounded as they are packed
//     (A is then always packed, never read in place): the same numbers at
//     about the float32 path's speed, with nothing gained.

// bf16Force routes the bf16 GEMMs through the bf16 kernels' code on any
// CPU (the portable kernel where the CPU lacks AVX512_BF16), so that tests
// run the native route's blocking and packing here.
var bf16Force bool

// bf16Kernels reports whether bf16 GEMMs take the bf16 kernels' route.
func bf16Kernels() bool { return bf16Asm || bf16Force }

// RoundBF16 rounds every value of x to bfloat16 in place (ToBF16, kept
// as a float32), for GemmPackedRoundedA.
func RoundBF16(x []float32) { roundBF16(x) }

// roundBF16Go is RoundBF16 in Go: ToBF16's rounding of a finite normal
// value inline, ToBF16 itself for the rest (zeros, subnormals, NaNs).
func roundBF16Go(x []float32) {
	for i, v := range x {
		u := math.Float32bits(v)
		r := (u + 0x7fff + (u>>16)&1) &^ 0xffff
		if e := u & 0x7f800000; e == 0 || e == 0x7f800000 {
			r = uint32(ToBF16(v)) << 16
		}
		x[i] = math.Float32frombits(r)
	}
}

// GemmWorkBF16 is GemmWork in bfloat16 arithmetic: C = alpha*op(A)*op(B)
// + beta*C with alpha*op(A) and op(B) rounded to bfloat16 and the products
// accumulated in float32 (then scaled C added in float32). It allocates
// nothing; work must hold GemmWorkSize floats.
func GemmWorkBF16(work []float32, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32,
	ldb int, beta float32, c []float32, ldc int) {
	checkGemmWork(work, transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if bf16Kernels() && !transA && alpha == 1 {
		gemmWorkBF16Kernels(work, transB, m, n, k, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemmBuf(splitWork(work), true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmWorkBF16Kernels is GemmWorkBF16 on the bf16 kernels, for A read
// untransposed and alpha 1: for each block of ncBlock columns and bf16KC
// rows, B's block is packed in bf16 pairs into the workspace (after the
// bf16 path's own workspace of WorkSizeBF16 floats).
func gemmWorkBF16Kernels(work []float32, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32,
	c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || beta != 0 {
		scaleC(m, n, beta, c, ldc)
	}
	if k == 0 {
		return
	}
	aw := work[:WorkSizeBF16()]
	rest := work[WorkSizeBF16():]
	bw := unsafe.Slice((*uint32)(unsafe.Pointer(&rest[0])), len(rest))
	for jc := 0; jc < n; jc += ncBlock {
		nb := min(ncBlock, n-jc)
		for pc := 0; pc < k; pc += bf16KC {
			kb := min(bf16KC, k-pc)
			boff := pc*ldb + jc
			if transB {
				boff = jc*ldb + pc
			}
			pb := PackedBF16{k: kb, n: nb, data: bw[:bf16PanelWords(kb, nb)]}
			packBF16(&pb, transB, b[boff:], ldb)
			var bias []float32 // nil: accumulate into C
			if pc == 0 && beta == 0 {
				bias = zeroRow[:nb] // the first block overwrites C
			}
			gemmBF16(m, a[pc:], lda, &pb, bias, false, c[jc:], ldc, aw)
		}
	}
}

// PackBIntoBF16 is PackBInto with every value of op(B) rounded to
// bfloat16: GemmPacked with the result rounds A too, which makes it a
// bfloat16 GEMM with float32 accumulation (as GemmWorkBF16). Where the CPU
// has AVX512_BF16 it also packs B for the bf16 kernels, which GemmPacked
// then uses for untransposed A with alpha 1.
func PackBIntoBF16(p *PackedB, transB bool, k, n int, b []float32, ldb int) *PackedB {
	var keep *PackedBF16 // an earlier bf16 packing, whose storage is reused
	if p != nil {
		keep = p.b16
	}
	p = packBInto(p, transB, k, n, b, ldb, true)
	if bf16Kernels() {
		p.b16 = packBF16Into(keep, transB, k, n, b, ldb)
	}
	return p
}

// GemmPackedRoundedA is GemmPacked (alpha 1, A not transposed) for a B
// packed by PackBIntoBF16 and an A whose values are bfloat16 already
// (RoundBF16): A is read in place, not rounded again. For a convolution's
// input read with overlapping rows (lda < k), rounding the copy once saves
// rounding each value once per row that reads it.
func GemmPackedRoundedA(m int, a []float32, lda int, b *PackedB, beta float32, c []float32, ldc int, work []float32) {
	gemmPacked(false, m, 1, a, lda, b, beta, c, ldc, work, false, false)
}

// gemmBF16Beta computes C = bf16(A)*B + beta*C on the bf16 kernels (A m x k
// untransposed, rows may overlap; work of WorkSize floats, which is
// WorkSizeBF16).
func gemmBF16Beta(m int, a []float32, lda int, b *PackedBF16, beta float32, c []float32, ldc int, work []float32) {
	if beta == 0 && b.n <= len(zeroRow) {
		gemmBF16(m, a, lda, b, zeroRow[:b.n], false, c, ldc, work)
		return
	}
	scaleC(m, b.n, beta, c, ldc)
	gemmBF16(m, a, lda, b, nil, false, c, ldc, work)
}
