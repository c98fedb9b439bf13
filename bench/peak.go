package bench

import (
	"time"

	"rgcpred/base/sgemm"
)

// peakGFLOPs measures the machine's multiply-add rate on one core: the
// SGEMM micro-kernel on square matrices that fit the caches, for about d.
// A window's FLOPs (model.Config.FLOPs) over this rate is the floor of its
// cost.
func peakGFLOPs(d time.Duration) float64 {
	const n = 384
	a := make([]float32, n*n)
	b := make([]float32, n*n)
	c := make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(i%7)/7, float32(i%5)/5
	}
	sgemm.Gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n) // warm up
	var reps int
	start := time.Now()
	for time.Since(start) < d {
		sgemm.Gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
		reps++
	}
	return 2 * n * n * n * float64(reps) / time.Since(start).Seconds() / 1e9
}
