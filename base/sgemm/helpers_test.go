package sgemm

// The GEMM variants below serve the tests only: GemmPackedReLU reaches the
// fused ReLU store, GemmParallel checks results under a split of C.

import (
	"sync"
)

// GemmPackedReLU is GemmPacked followed by C = max(C, 0), fused into the
// micro-kernel's final store.
func GemmPackedReLU(transA bool, m int, alpha float32, a []float32, lda int, b *PackedB, beta float32, c []float32, ldc int,
	work []float32) {
	gemmPacked(transA, m, alpha, a, lda, b, beta, c, ldc, work, true, false)
}

// GemmParallel is Gemm split over up to workers goroutines, each computing a
// block of rows of C (or of columns, when C has few rows). workers <= 1 runs
// Gemm on the calling goroutine.
func GemmParallel(workers int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int,
	beta float32, c []float32, ldc int) {
	checkMat("A", transA, m, k, a, lda)
	checkMat("B", transB, k, n, b, ldb)
	checkMat("C", false, m, n, c, ldc)
	// Below this much work the goroutine hand-off costs more than it saves.
	if workers <= 1 || int64(m)*int64(n)*int64(k) < 1<<16 {
		gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	var wg sync.WaitGroup
	if m >= n || m >= workers*kern.mr*4 {
		// Split rows of C in multiples of mr.
		step := (m + workers - 1) / workers
		step = (step + kern.mr - 1) / kern.mr * kern.mr
		for i0 := 0; i0 < m; i0 += step {
			rows := min(step, m-i0)
			aoff := i0 * lda
			if transA {
				aoff = i0
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				gemm(transA, transB, rows, n, k, alpha, a[aoff:], lda, b, ldb, beta, c[i0*ldc:], ldc)
			}()
		}
	} else {
		step := (n + workers - 1) / workers
		step = (step + kern.nr - 1) / kern.nr * kern.nr
		for j0 := 0; j0 < n; j0 += step {
			cols := min(step, n-j0)
			boff := j0
			if transB {
				boff = j0 * ldb
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				gemm(transA, transB, m, cols, k, alpha, a, lda, b[boff:], ldb, beta, c[j0:], ldc)
			}()
		}
	}
	wg.Wait()
}
