package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Synchronisation of the engine's threads. A window split across threads
// is a sequence of phases (a layer, or a few layers that read only their
// own rows), and each phase's rows are cut into chunks that the threads
// claim one at a time from a shared ticket counter (tickets): whoever is
// running takes the next chunk, so a thread that is late (still waking, or
// descheduled by the host) costs its partners nothing but the chunk it
// holds, and the caller never waits for a helper that has not arrived. A
// thread passes the end of a phase once every chunk of it is done, which
// takes one atomic load when it did the last chunk itself: waiting, it
// first spins (a chunk takes 1-20 us), then parks on a condition variable
// that the thread finishing the phase's last chunk signals. Between calls
// the helpers likewise poll for the next job for spinFor, then park, so an
// idle engine burns no CPU. A caller that knows a batch is coming
// (Engine.Expect) keeps them polling until it comes, yielding their core to
// any other runnable thread meanwhile: a parked thread takes 0.1-0.3 ms to
// wake on a virtual machine, about a whole window.

// spinFor is how long a waiting thread polls before parking. It covers a
// partner's chunk in progress (a few to a few tens of microseconds) on a
// quiet machine.
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
// publishing the event) would not do: a waiter that left one phase by
// spinning and re-armed its flag for the next could take the token a late
// waker of the previous phase sent, and the threads would lose step.
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

// tickets deals out the chunks of a call's phases. Tickets are numbered
// across the engine's life: the call's first phase owns tickets base..base+n0,
// the next one the following n1, and so on, where every thread derives the
// same chunk counts from the same phase sizes. A thread claims the next
// ticket of its current phase with a compare-and-swap, so no ticket is
// claimed twice and none of a later phase before its phase is open; done
// counts finished tickets, so a phase ending at ticket end is complete once
// done >= end (a ticket of a later phase can only be claimed after that).
type tickets struct {
	next atomic.Uint64 // the next unclaimed ticket
	done atomic.Uint64 // tickets finished
	// spin is the polling budget (ns) of a thread waiting for a phase's
	// last chunks before it parks (spinFor; benchmarks compare 0, parking
	// at once, and pure spinning).
	spin  atomic.Int64
	sleep sleepers
	// parks counts the caller's waits for a phase that ended parked: a
	// helper held a chunk for longer than spinFor (contention). A
	// helper's waits are not counted: they cost the caller nothing.
	parks atomic.Int64
}

func newTickets() *tickets {
	tk := &tickets{}
	tk.spin.Store(int64(spinFor))
	tk.sleep.init()
	return tk
}

// claim returns the next unclaimed ticket below end, or false when every
// ticket below end is claimed.
func (tk *tickets) claim(end uint64) (uint64, bool) {
	for {
		t := tk.next.Load()
		if t >= end {
			return 0, false
		}
		if tk.next.CompareAndSwap(t, t+1) {
			return t, true
		}
	}
}

// finish records one finished ticket of the phase ending at end, and wakes
// the parked threads when it was the phase's last.
func (tk *tickets) finish(end uint64) {
	if tk.done.Add(1) == end {
		tk.sleep.wake()
	}
}

// wait returns once every ticket below end is finished, and reports
// whether it had to park. Writes made by a thread before finishing a
// ticket are visible to every thread after wait (sync/atomic operations
// are sequentially consistent, and so is the mutex).
func (tk *tickets) wait(end uint64) (parked bool) {
	if tk.done.Load() >= end {
		return false
	}
	s := spinner{budget: time.Duration(tk.spin.Load())}
	for tk.done.Load() < end {
		if !s.more() {
			tk.sleep.wait(func() bool { return tk.done.Load() >= end })
			return true
		}
	}
	return false
}

// team hands jobs to the helper goroutines 1..helpers. The caller does
// not wait for them: it finishes a call on its own when they are late (the
// tickets), and hands out the next job only once every helper has reported
// the previous one (idle), running the call alone otherwise, so that a job
// description is never rewritten while a helper may still read it.
type team struct {
	helpers int32
	gen     atomic.Uint32 // bumped once per job, and by close
	done    atomic.Int32  // helpers finished with the current job
	quit    atomic.Bool
	// Helpers waiting for a job.
	idleSleep sleepers
	// idle is the polling budget (ns) of a helper waiting for the next
	// job before it parks.
	idle atomic.Int64
	// warm is the time (Unix ns) until which the helpers poll for the
	// next job instead of parking (expect), until that job starts; 0 or
	// past: none.
	warm atomic.Int64
	// fewPs is set by expect when the Go scheduler has fewer Ps than the
	// engine has threads (GOMAXPROCS <= helpers): a polling helper then
	// also hands its P to other goroutines between polls, or the caller
	// might find no P to run on.
	fewPs atomic.Bool
}

func newTeam(helpers int) *team {
	t := &team{helpers: int32(helpers)}
	t.done.Store(int32(helpers)) // no job outstanding
	t.idle.Store(int64(spinFor))
	t.idleSleep.init()
	return t
}

// ready reports whether every helper has reported the last job, so that
// the next may be published.
func (t *team) ready() bool { return t.done.Load() >= t.helpers }

// start publishes a new job (the caller has written its description
// before), ends the polling for an expected job, and wakes the parked
// helpers. The team must be ready.
func (t *team) start() {
	t.warm.Store(0) // the expected job, if any, has come
	t.done.Store(0)
	t.gen.Add(1)
	t.idleSleep.wake()
}

// parked reports whether a helper is parked (or about to park) waiting
// for the next job.
func (t *team) parked() bool { return t.idleSleep.n.Load() > 0 }

// report tells the caller that one helper is done with the current job
// and will read its description no more.
func (t *team) report() { t.done.Add(1) }

// expect keeps the helpers polling for the next job until the time until
// (Unix ns), waking the parked ones.
func (t *team) expect(until int64) {
	t.fewPs.Store(runtime.GOMAXPROCS(0) <= int(t.helpers))
	t.warm.Store(until)
	t.idleSleep.wake()
}

// warming reports whether the helpers are to poll for a job expected now.
func (t *team) warming() bool {
	w := t.warm.Load()
	return w != 0 && time.Now().UnixNano() < w
}

// next blocks a helper until the job after generation seen is
// published and returns its generation: it polls for t.idle, then parks;
// while a job is expected (expect) it polls, yielding its core to other
// runnable threads between polls (and its P to other goroutines when
// fewPs).
// (Only one job is published at a time: start waits for ready.)
func (t *team) next(seen uint32) uint32 {
	s := spinner{budget: time.Duration(t.idle.Load())}
	for t.gen.Load() == seen {
		if t.warming() {
			// Yield the core, and the P only where Ps are scarce: a
			// helper that gives up its P waits for another thread to
			// take it up again, as slow as waking from parked.
			if t.fewPs.Load() {
				runtime.Gosched()
			}
			yieldThread()
			continue
		}
		if !s.more() {
			t.idleSleep.wait(func() bool { return t.gen.Load() != seen || t.warming() })
			s = spinner{budget: time.Duration(t.idle.Load())}
		}
	}
	return t.gen.Load()
}
