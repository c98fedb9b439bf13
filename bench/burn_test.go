package bench

import (
	"context"
	"testing"
	"time"

	"rgcpred/base/cputime"
)

// TestBurn: Burn keeps its threads busy (the process's CPU time grows
// with the wall time) and returns once its context ends.
func TestBurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	m := cputime.Start()
	Burn(ctx, 1)
	wall, cpu := m.Elapsed()
	if wall > 2*time.Second {
		t.Errorf("Burn returned %v after its context's 200 ms", wall)
	}
	if cpu < 50*time.Millisecond {
		t.Errorf("%v of CPU in %v on one thread, want at least 50 ms (a quarter, on a loaded machine)", cpu, wall)
	}
}
