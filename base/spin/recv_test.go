package spin

import (
	"testing"
	"time"

	"rgcpred/base/spin/spintest"
)

// TestRecv: Recv returns what <-c would, whether the value comes while it
// polls, after its budget (then it blocks), or is already there, and
// reports a closed channel.
func TestRecv(t *testing.T) {
	defer spintest.Watchdog(t, 30*time.Second)()
	for _, tc := range []struct {
		name   string
		budget time.Duration
		after  time.Duration // the value is sent this long after Recv starts
		close  bool
	}{
		{"sent while polling", 200 * time.Millisecond, 5 * time.Millisecond, false},
		{"sent after the budget", time.Millisecond, 30 * time.Millisecond, false},
		{"no budget", 0, 5 * time.Millisecond, false},
		{"already there", time.Millisecond, -1, false},
		{"closed while polling", 200 * time.Millisecond, 5 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := make(chan int, 1)
			send := func() {
				if tc.close {
					close(c)
				} else {
					c <- 7
				}
			}
			if tc.after < 0 {
				send()
			} else {
				go func() { time.Sleep(tc.after); send() }()
			}
			t0 := time.Now()
			v, ok := Recv(c, tc.budget)
			if ok == tc.close || (ok && v != 7) || (!ok && v != 0) {
				t.Errorf("Recv = %d, %v; want 7, true for a value, 0, false for a close", v, ok)
			}
			if d := time.Since(t0); tc.after > 0 && d < tc.after {
				t.Errorf("returned after %v, before the value was sent at %v", d, tc.after)
			}
		})
	}
}

// TestPollGivesUp: with nothing sent, Poll returns got false once its
// budget has passed, and at once with no budget.
func TestPollGivesUp(t *testing.T) {
	defer spintest.Watchdog(t, 30*time.Second)()
	c := make(chan int)
	for _, budget := range []time.Duration{0, 5 * time.Millisecond} {
		t0 := time.Now()
		if _, _, got := Poll(c, budget); got {
			t.Fatalf("budget %v: got a value from an empty channel", budget)
		}
		if d := time.Since(t0); d < budget {
			t.Errorf("budget %v: gave up after %v", budget, d)
		}
	}
}
