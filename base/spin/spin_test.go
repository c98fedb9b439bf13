package spin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rgcpred/base/spin/spintest"
)

// TestSpinnerBudget: More answers true for at least the budget and stops
// within a generous bound past it (the clock is read every 64 polls; a
// loaded machine may deschedule the poller for a few milliseconds).
func TestSpinnerBudget(t *testing.T) {
	for _, budget := range []time.Duration{0, 50 * time.Microsecond, For, 2 * time.Millisecond} {
		t.Run(budget.String(), func(t *testing.T) {
			s := Spinner{Budget: budget}
			t0 := time.Now()
			polls := 0
			for s.More() {
				polls++
			}
			d := time.Since(t0)
			if d < budget {
				t.Errorf("stopped after %v, want at least the budget %v", d, budget)
			}
			if d > budget+50*time.Millisecond {
				t.Errorf("stopped after %v, want within 50 ms of the budget %v", d, budget)
			}
			if polls < 63 {
				t.Errorf("%d polls, want at least 63 before the first clock read", polls)
			}
		})
	}
}

// TestSpinnerOneP: with one P, a spinner polling for a flag that another
// goroutine sets sees it within its budget: past a few thousand polls it
// yields the P.
func TestSpinnerOneP(t *testing.T) {
	defer spintest.Watchdog(t, 30*time.Second)()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 20 {
		var flag atomic.Bool
		go flag.Store(true)
		s := Spinner{Budget: time.Second}
		for !flag.Load() {
			if !s.More() {
				t.Fatal("flag not seen within 1 s of polling on one P")
			}
		}
	}
}

// TestSleepersLateWake: wake-ups that do not release a parked waiter (a
// late waker of an earlier event, which a flag-and-token design would
// mistake for its own) leave it parked; the event followed by Wake
// releases it.
func TestSleepersLateWake(t *testing.T) {
	defer spintest.Watchdog(t, 30*time.Second)()
	var s Sleepers
	var ev atomic.Bool
	returned := make(chan struct{})
	go func() {
		s.Wait(ev.Load)
		close(returned)
	}()
	for s.Waiting() == 0 {
		runtime.Gosched()
	}
	for range 100 {
		s.Wake()
		runtime.Gosched()
	}
	select {
	case <-returned:
		t.Fatal("waiter released by wake-ups without its event")
	case <-time.After(20 * time.Millisecond):
	}
	ev.Store(true)
	s.Wake()
	<-returned
	if n := s.Waiting(); n != 0 {
		t.Errorf("%d sleepers after the waiter returned, want 0", n)
	}
}

// TestSleepersNoLostWakeup: waiters that park on a counter reaching their
// target, while another goroutine advances it and calls Wake each time,
// all return (a lost wake-up hangs and the watchdog fails the test), with
// and without a spin before parking.
func TestSleepersNoLostWakeup(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	for _, tc := range []struct {
		name    string
		waiters int
		budget  time.Duration
	}{
		{"one waiter, park at once", 1, 0},
		{"three waiters, park at once", 3, 0},
		{"three waiters, spin first", 3, 2 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sleepers
			var count atomic.Int64
			const steps = 2000
			var wg sync.WaitGroup
			for range tc.waiters {
				wg.Go(func() {
					for target := int64(1); target <= steps; target++ {
						sp := Spinner{Budget: tc.budget}
						for count.Load() < target {
							if !sp.More() {
								s.Wait(func() bool { return count.Load() >= target })
							}
						}
					}
				})
			}
			for range steps {
				count.Add(1)
				s.Wake()
				if count.Load()%7 == 0 {
					runtime.Gosched()
				}
			}
			wg.Wait()
			if n := s.Waiting(); n != 0 {
				t.Errorf("%d sleepers after every waiter returned, want 0", n)
			}
		})
	}
}
