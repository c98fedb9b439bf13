package bench

import (
	"context"
	"sync"
	"sync/atomic"

	"rgcpred/base/sgemm"
)

// Burn keeps threads cores busy with SGEMM on cache-sized matrices, the
// arithmetic of a training run, until ctx ends: the CPU-heavy job beside
// the daemon in the real-time comparison (CompareRealTime), run in a
// process of its own so that the daemon's real-time mode does not reach
// it. It returns the number of 256x256 products computed.
func Burn(ctx context.Context, threads int) int64 {
	var wg sync.WaitGroup
	var done atomic.Int64
	for range threads {
		wg.Go(func() {
			const n = 256
			a := make([]float32, n*n)
			b := make([]float32, n*n)
			c := make([]float32, n*n)
			for i := range a {
				a[i], b[i] = float32(i%7)/7, float32(i%5)/5
			}
			for ctx.Err() == nil {
				sgemm.Gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load()
}
