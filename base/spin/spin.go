// Package spin holds the waiting primitives of the project's thread teams
// (the inference engine's and the training graph's) and of the daemon's
// real-time mode: a bounded poll, a place to park once the poll's budget
// is spent, a channel receive that polls first (Recv), and a yield of the
// core between polls (Yield).
//
// A team's threads hand each other work every few microseconds to a few
// hundred. A parked OS thread takes 0.1-0.3 ms to wake on a virtual
// machine, as long as a whole chunk of work, so a waiting thread first
// polls for For and only then parks: a busy team never parks, an idle one
// burns no CPU.
package spin

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// For is how long a waiting thread polls before parking. It covers a
// partner's chunk in progress (a few to a few tens of microseconds) and
// the gap between two jobs of a busy team, on a quiet machine.
const For = 100 * time.Microsecond

// Spinner polls a condition for a bounded time. Its zero value with
// Budget set is ready; make a new one per wait.
type Spinner struct {
	// Budget is how long More keeps answering true.
	Budget   time.Duration
	polls    int
	deadline time.Time
}

// More reports whether the caller should poll again: true until the
// budget is spent (the clock is read every 64 polls, and the budget counts
// from the 64th). Past a few thousand polls it also yields to the Go
// scheduler, so that a team progresses when there are fewer Ps than
// threads (GOMAXPROCS=1).
func (s *Spinner) More() bool {
	s.polls++
	if s.polls&63 != 0 {
		return true
	}
	if s.polls == 64 {
		s.deadline = time.Now().Add(s.Budget)
	}
	if s.polls >= 4096 {
		runtime.Gosched()
	}
	return time.Now().Before(s.deadline)
}

// Sleepers is where threads park once their spin budget is spent: a
// mutex and condition variable, and the number of threads parked or about
// to park. A waiter parks with Wait(released), which returns once
// released() holds; whoever makes it hold calls Wake afterwards. The zero
// value is ready.
//
// Invariants:
//   - No wake-up is lost. The waiter increments the count, then tests
//     released() under the mutex; the waker makes released() true, then
//     reads the count. Go's atomics are sequentially consistent, so either
//     the waiter sees the event and does not sleep, or the waker sees a
//     count > 0 and broadcasts under the mutex, which it can take only once
//     the waiter is inside cond.Wait.
//   - A late wake-up (from an earlier event) is harmless: the waiter tests
//     released() again.
//
// Not a per-thread flag and token channel: a waiter that left one phase by
// spinning and re-armed its flag could take the token a late waker of the
// previous phase sent, and the threads would lose step.
type Sleepers struct {
	n    atomic.Int32
	mu   sync.Mutex
	cond sync.Cond
}

// Wait blocks until released() holds. released is called with the
// Sleepers' mutex held, so it must not call Wait or Wake.
func (s *Sleepers) Wait(released func() bool) {
	s.mu.Lock()
	if s.cond.L == nil {
		s.cond.L = &s.mu // set and read only under mu
	}
	s.n.Add(1)
	for !released() {
		s.cond.Wait()
	}
	s.n.Add(-1)
	s.mu.Unlock()
}

// Wake wakes the parked threads after an event that may release them. It
// costs one atomic load when none is parked.
func (s *Sleepers) Wake() {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Waiting returns the number of threads parked or about to park.
func (s *Sleepers) Waiting() int { return int(s.n.Load()) }
