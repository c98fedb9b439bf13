package engine

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Synchronisation of the engine's threads. A window split across threads
// meets a barrier between layers about 15 times per window, each layer
// taking 5-60 us, so a barrier must usually cost well under a microsecond:
// a waiting thread first spins on an atomic counter. When the machine is
// oversubscribed, the thread it waits for may be descheduled for a whole
// time slice, and spinning would then burn the very core that thread needs:
// so after spinFor the waiter parks on a channel and the last thread to
// arrive wakes it (a spin-then-block barrier). Between calls the helpers
// likewise poll for the next job for spinFor, then park, so an idle engine
// burns no CPU.

// spinFor is how long a waiting thread polls before parking. It covers the
// usual skew between the threads at a barrier (uneven row splits, cache
// misses) on a quiet machine.
const spinFor = 100 * time.Microsecond

// spinner polls a condition for a bounded time.
type spinner struct {
	polls    int
	deadline time.Time
	budget   time.Duration
}

// more reports whether the caller should poll again: true until the budget
// is spent (the clock is read every 64 polls). Past a few thousand polls it
// also yields to the Go scheduler, so that the engine progresses when there
// are fewer Ps than threads (GOMAXPROCS=1).
func (s *spinner) more() bool {
	s.polls++
	if s.polls&63 != 0 {
		return true
	}
	if s.polls == 64 {
		s.deadline = time.Now().Add(s.budget)
	}
	if s.polls >= 4096 {
		runtime.Gosched()
	}
	return time.Now().Before(s.deadline)
}

// barrier is a reusable spin-then-block barrier for parties threads.
type barrier struct {
	parties int32
	arrived atomic.Int32
	phase   atomic.Uint32
	// spin is the polling budget (ns) of a waiter before it parks
	// (spinFor; benchmarks compare 0, parking at once, and pure spinning).
	spin   atomic.Int64
	parked []atomic.Bool // party i is blocked on wake[i]
	wake   []chan struct{}
	parks  atomic.Int64 // waits that ended parked (contention)
}

func newBarrier(parties int) *barrier {
	b := &barrier{parties: int32(parties), parked: make([]atomic.Bool, parties)}
	b.spin.Store(int64(spinFor))
	for i := 0; i < parties; i++ {
		b.wake = append(b.wake, make(chan struct{}, 1))
	}
	return b
}

// wait returns once all parties have called wait; part is the caller's
// index (0..parties-1). Writes made before wait by any party are visible
// to every party after it (sync/atomic operations are sequentially
// consistent, and so are channel operations).
func (b *barrier) wait(part int) {
	ph := b.phase.Load()
	if b.arrived.Add(1) == b.parties {
		b.arrived.Store(0)
		b.phase.Add(1)
		for i := range b.parked {
			if b.parked[i].CompareAndSwap(true, false) {
				b.wake[i] <- struct{}{}
			}
		}
		return
	}
	s := spinner{budget: time.Duration(b.spin.Load())}
	for b.phase.Load() == ph {
		if !s.more() {
			b.parks.Add(1)
			park(&b.parked[part], b.wake[part], func() bool { return b.phase.Load() != ph })
			return
		}
	}
}

// park blocks on wake until a waker that sees flag set clears it and sends
// a token; released reports whether the awaited event has already
// happened (checked after setting the flag, so that no wake-up is lost).
func park(flag *atomic.Bool, wake chan struct{}, released func() bool) {
	flag.Store(true)
	if released() && flag.CompareAndSwap(true, false) {
		return
	}
	// Either the event has not happened (a waker will see the flag) or a
	// waker cleared the flag first and is sending the token.
	<-wake
}

// team hands jobs to the helper goroutines 1..helpers and waits for them.
type team struct {
	gen    atomic.Uint32 // bumped once per job, and by close
	done   atomic.Int32  // helpers finished with the current job
	quit   atomic.Bool
	parked []atomic.Bool // helper i+1 is blocked on wake[i]
	wake   []chan struct{}
	// The caller of finish, parked until the last helper is done.
	callerParked atomic.Bool
	callerWake   chan struct{}
	// spin is the polling budget (ns) of finish before parking (as
	// barrier.spin); idle that of a helper waiting for the next job.
	spin, idle atomic.Int64
}

func newTeam(helpers int) *team {
	t := &team{parked: make([]atomic.Bool, helpers), callerWake: make(chan struct{}, 1)}
	t.spin.Store(int64(spinFor))
	t.idle.Store(int64(spinFor))
	for i := 0; i < helpers; i++ {
		t.wake = append(t.wake, make(chan struct{}, 1))
	}
	return t
}

// start publishes a new job (the caller has written its description
// before) and wakes the parked helpers.
func (t *team) start() {
	t.done.Store(0)
	t.gen.Add(1)
	for i := range t.parked {
		if t.parked[i].CompareAndSwap(true, false) {
			t.wake[i] <- struct{}{}
		}
	}
}

// finish waits until every helper has reported the current job done.
func (t *team) finish() {
	n := int32(len(t.parked))
	s := spinner{budget: time.Duration(t.spin.Load())}
	for t.done.Load() < n {
		if !s.more() {
			park(&t.callerParked, t.callerWake, func() bool { return t.done.Load() >= n })
			return
		}
	}
}

// report tells finish that one helper is done with the current job.
func (t *team) report() {
	if t.done.Add(1) == int32(len(t.parked)) && t.callerParked.CompareAndSwap(true, false) {
		t.callerWake <- struct{}{}
	}
}

// next blocks helper h (0-based) until the job after generation seen is
// published and returns its generation: it polls for t.idle, then parks.
func (t *team) next(h int, seen uint32) uint32 {
	s := spinner{budget: time.Duration(t.idle.Load())}
	for t.gen.Load() == seen {
		if !s.more() {
			park(&t.parked[h], t.wake[h], func() bool { return t.gen.Load() != seen })
			break
		}
	}
	return t.gen.Load()
}
