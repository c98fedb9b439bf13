package engine

import (
	"runtime"
	"sync/atomic"
	"time"

	"rgcpred/base/spin"
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

// spinFor is how long a waiting thread polls before parking (spin.For).
const spinFor = spin.For

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
	sleep spin.Sleepers
	// parks counts the caller's waits for a phase that ended parked: a
	// helper held a chunk for longer than spinFor (contention). A
	// helper's waits are not counted: they cost the caller nothing.
	parks atomic.Int64
}

func newTickets() *tickets {
	tk := &tickets{}
	tk.spin.Store(int64(spinFor))
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
		tk.sleep.Wake()
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
	s := spin.Spinner{Budget: time.Duration(tk.spin.Load())}
	for tk.done.Load() < end {
		if !s.More() {
			tk.sleep.Wait(func() bool { return tk.done.Load() >= end })
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
	idleSleep spin.Sleepers
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
	t.idleSleep.Wake()
}

// parked reports whether a helper is parked (or about to park) waiting
// for the next job.
func (t *team) parked() bool { return t.idleSleep.Waiting() > 0 }

// report tells the caller that one helper is done with the current job
// and will read its description no more.
func (t *team) report() { t.done.Add(1) }

// expect keeps the helpers polling for the next job until the time until
// (Unix ns), waking the parked ones.
func (t *team) expect(until int64) {
	t.fewPs.Store(runtime.GOMAXPROCS(0) <= int(t.helpers))
	t.warm.Store(until)
	t.idleSleep.Wake()
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
	s := spin.Spinner{Budget: time.Duration(t.idle.Load())}
	for t.gen.Load() == seen {
		if t.warming() {
			// Yield the core, and the P only where Ps are scarce: a
			// helper that gives up its P waits for another thread to
			// take it up again, as slow as waking from parked.
			if t.fewPs.Load() {
				runtime.Gosched()
			}
			spin.Yield()
			continue
		}
		if !s.More() {
			t.idleSleep.Wait(func() bool { return t.gen.Load() != seen || t.warming() })
			s = spin.Spinner{Budget: time.Duration(t.idle.Load())}
		}
	}
	return t.gen.Load()
}
