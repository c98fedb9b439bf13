package bench

import (
	"context"
	"testing"
	"time"

	"rgcpred/base/cputime"
)

// TestBurn: Burn computes products on each of its threads for as long as
// its context lasts (its CPU time is most of the process's, however
// loaded the machine) and returns once the context ends.
func TestBurn(t *testing.T) {
	for _, threads := range []int{1, 2} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		m := cputime.Start()
		n := Burn(ctx, threads)
		wall, cpu := m.Elapsed()
		cancel()
		if wall > 2*time.Second {
			t.Errorf("%d threads: Burn returned %v after its context's 200 ms", threads, wall)
		}
		// A product is 33.5 MFLOP: at 10 GFLOP/s on a sixth of a core,
		// 0.2 s holds about ten.
		if n < int64(threads) || cpu < 10*time.Millisecond {
			t.Errorf("%d threads: %d products, %v of CPU in %v", threads, n, cpu, wall)
		}
	}
}
