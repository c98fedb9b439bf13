//go:build !amd64 || purego

package sgemm

// packA is packAGo on this build.
func packA(transA bool, a []float32, lda, ic, mb, pc, kb int, alpha float32, dst []float32, round bool) {
	packAGo(transA, a, lda, ic, mb, pc, kb, alpha, dst, round)
}

// packB is packBGo on this build.
func packB(transB bool, b []float32, ldb, pc, kb, jc, nb int, dst []float32, round bool) {
	packBGo(transB, b, ldb, pc, kb, jc, nb, dst, round)
}

// transpose is transposeGo on this build.
func transpose(m, n int, a []float32, lda int, b []float32, ldb int) {
	transposeGo(m, n, a, lda, b, ldb)
}
