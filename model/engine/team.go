package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Synchronisation of the engine's threads. A window split across threads
// meets a barrier between layers about 15 times per window, each layer
// taking 5-60 us, so a barrier must usually cost well under a microsecond:
// a waiting thread first spins on an atomic counter. When the machine is
// oversubscribed, the thread it waits for may be descheduled for a whole
// time slice, and spinning would then burn the very core that thread needs:
// so after spinFor the waiter parks on a condition variable and the last
// thread to arrive wakes it (a spin-then-block barrier). Between calls the helpers
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

// sleepers is where threads park once their spin budget is spent: a
// mutex and condition variable, and the number of threads parked or about
// to park. A waiter parks with wait(released), which returns once
// released() holds; whoever makes it hold calls wake afterwards.
//
// No wake-up is lost: the waiter increments n and then tests released()
// (under mu), the waker makes released() true and then reads n; Go's atomics
// are sequentially consistent, so either the waiter sees the event and
// does not sleep, or the waker sees n > 0 and broadcasts under mu, which
// it can only take once the waiter is inside cond.Wait. A late wake-up
// (from an earlier event) is harmless: the waiter tests released() again.
//
// A per-thread flag and a token channel (the waker clearing the flag after
// publishing the event) would not do: a waiter that left one barrier by
// spinning and re-armed its flag for the next could take the token a late
// waker of the previous barrier sent, and the threads would lose step.
type sleepers struct {
	n    atomic.Int32
	mu   sync.Mutex
	cond sync.Cond
}

func (s *sleepers) init() { s.cond.L = &s.mu }

// wait blocks until released() holds.
func (s *sleepers) wait(released func() bool) {
	s.mu.Lock()
	s.n.Add(1)
	for !released() {
		s.cond.Wait()
	}
	s.n.Add(-1)
	s.mu.Unlock()
}

// wake wakes the parked threads after an event that may release them.
func (s *sleepers) wake() {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}

// barrier is a reusable spin-then-block barrier for parties threads.
type barrier struct {
	parties int32
	arrived atomic.Int32
	phase   atomic.Uint32
	// spin is the polling budget (ns) of a waiter before it parks
	// (spinFor; benchmarks compare 0, parking at once, and pure spinning).
	spin  atomic.Int64
	sleep sleepers
	parks atomic.Int64 // waits that ended parked (contention)
}

func newBarrier(parties int) *barrier {
	b := &barrier{parties: int32(parties)}
	b.spin.Store(int64(spinFor))
	b.sleep.init()
	return b
}

// wait returns once all parties have called wait; part is the caller's
// index (0..parties-1), kept for the callers' symmetry. Writes made before
// wait by any party are visible to every party after it (sync/atomic
// operations are sequentially consistent, and so is the mutex).
func (b *barrier) wait(part int) {
	_ = part
	ph := b.phase.Load()
	if b.arrived.Add(1) == b.parties {
		// Every other party is waiting for phase ph+1, so none can
		// arrive at the next crossing before the reset below.
		b.arrived.Store(0)
		b.phase.Add(1)
		b.sleep.wake()
		return
	}
	s := spinner{budget: time.Duration(b.spin.Load())}
	for b.phase.Load() == ph {
		if !s.more() {
			b.parks.Add(1)
			b.sleep.wait(func() bool { return b.phase.Load() != ph })
			return
		}
	}
}

// team hands jobs to the helper goroutines 1..helpers and waits for them.
type team struct {
	helpers int32
	gen     atomic.Uint32 // bumped once per job, and by close
	done    atomic.Int32  // helpers finished with the current job
	quit    atomic.Bool
	// Helpers waiting for a job, and the caller of finish waiting for the
	// helpers (separate, so that neither's wake-ups disturb the other).
	idleSleep, finishSleep sleepers
	// spin is the polling budget (ns) of finish before parking (as
	// barrier.spin); idle that of a helper waiting for the next job.
	spin, idle atomic.Int64
}

func newTeam(helpers int) *team {
	t := &team{helpers: int32(helpers)}
	t.spin.Store(int64(spinFor))
	t.idle.Store(int64(spinFor))
	t.idleSleep.init()
	t.finishSleep.init()
	return t
}

// start publishes a new job (the caller has written its description
// before) and wakes the parked helpers. The previous job must be finished.
func (t *team) start() {
	t.done.Store(0)
	t.gen.Add(1)
	t.idleSleep.wake()
}

// finish waits until every helper has reported the current job done.
func (t *team) finish() {
	n := t.helpers
	s := spinner{budget: time.Duration(t.spin.Load())}
	for t.done.Load() < n {
		if !s.more() {
			t.finishSleep.wait(func() bool { return t.done.Load() >= n })
			return
		}
	}
}

// report tells finish that one helper is done with the current job.
func (t *team) report() {
	if t.done.Add(1) == t.helpers {
		t.finishSleep.wake()
	}
}

// next blocks helper h (0-based) until the job after generation seen is
// published and returns its generation: it polls for t.idle, then parks.
// (Only one job is published at a time: start waits for finish.)
func (t *team) next(h int, seen uint32) uint32 {
	_ = h
	s := spinner{budget: time.Duration(t.idle.Load())}
	for t.gen.Load() == seen {
		if !s.more() {
			t.idleSleep.wait(func() bool { return t.gen.Load() != seen })
			break
		}
	}
	return t.gen.Load()
}
