package bench

import (
	"context"
	"testing"
	"time"

	"rgcpred/base/cputime"
)

// TestBurn: Burn computes products on each of its threads for as long as
// its context lasts and returns once the context ends. The context ends
// once the process has used burnCPU of CPU per thread (on a loaded
// machine a fixed wall time may hold almost none), at most burnWall.
func TestBurn(t *testing.T) {
	const (
		burnCPU  = 20 * time.Millisecond // a product is 33.5 MFLOP: 2 or more at 10 GFLOP/s
		burnWall = 30 * time.Second
	)
	for _, threads := range []int{1, 2} {
		ctx, cancel := context.WithCancel(context.Background())
		m := cputime.Start()
		ended := make(chan time.Time, 1)
		go func() {
			for start := time.Now(); time.Since(start) < burnWall; time.Sleep(2 * time.Millisecond) {
				if _, cpu := m.Elapsed(); cpu >= burnCPU*time.Duration(threads) || cputime.Process() == 0 && time.Since(start) > 200*time.Millisecond {
					break
				}
			}
			ended <- time.Now()
			cancel()
		}()
		n := Burn(ctx, threads)
		returned := time.Now()
		wall, cpu := m.Elapsed()
		end := <-ended
		if d := returned.Sub(end); d > 2*time.Second {
			t.Errorf("%d threads: Burn returned %v after its context ended", threads, d)
		}
		if n < int64(threads) || cputime.Process() > 0 && cpu < burnCPU*time.Duration(threads) {
			t.Errorf("%d threads: %d products, %v of CPU in %v", threads, n, cpu, wall)
		}
		t.Logf("%d threads: %d products, %v of CPU in %v", threads, n, cpu, wall)
	}
}
