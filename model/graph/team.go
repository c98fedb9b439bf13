package graph

import (
	"runtime"
	"sync"
	"sync/atomic"

	"rgcpred/base/spin"
)

// parallel runs loops on n workers: the calling goroutine (worker 0) and
// helpers 1..n-1 of a team. Kernels keep scratch per worker, indexed by w.
type parallel struct {
	n int
	t *team
}

// body is the loop of a parallel section: chunk runs iterations [lo, hi)
// on worker w.
//
// A kernel keeps one body value per parallel section, a field of the
// kernel holding the call's arguments, which it sets before each run: the
// team keeps the body it runs where its helpers read it, so a closure
// passed instead would escape to the heap on every call, while a pointer
// to a field of the kernel allocates nothing. The fields are rewritten by
// the next call of the same section, which is safe because a graph runs
// one op at a time and no section of a kernel starts another section of
// the same kernel from inside a chunk (the chunks call the serial
// gemmTeam.on, never gemmTeam.run).
type body interface {
	chunk(lo, hi, w int)
}

// run splits [0, total) into min(p.n, total) contiguous chunks and calls
// b.chunk once per chunk, worker w taking chunk w, and returns once all
// are done. The caller takes chunk 0 itself: one hand-off fewer per call,
// and it does not sit idle. Without a team (or with a closed one) the
// chunks run on the caller one after another. A panic in a chunk reaches
// the caller once every chunk has returned.
func (p parallel) run(total int, b body) {
	n := min(p.n, total)
	if n <= 1 {
		b.chunk(0, total, 0)
		return
	}
	if p.t == nil || !p.t.open(n) {
		for w := range n {
			b.chunk(total*w/n, total*(w+1)/n, w)
		}
		return
	}
	p.t.run(n, total, b)
}

// team is a graph's helper goroutines, alive from its first parallel
// section to Graph.Close. A job is published by writing its description
// (body, total) and then storing the job word (a generation and the job's
// worker count n); helper w < n runs chunk w and reports, the others go
// back to waiting having read only the word. The caller waits for the n-1
// reports before it returns, so a description is never rewritten while a
// helper may still read it.
//
// Waiting, for the next job (a helper) or for the reports (the caller),
// polls, and parks (spin.Sleepers) only outside a run of the graph (hold)
// once spin.For has passed: a parked thread takes 0.1-0.3 ms to wake on a
// virtual machine, as long as a batch-norm chunk, and within a step the
// serial stretches between parallel sections (gorgonia's own operations,
// the executor, the one-thread kernels) often exceed spin.For, so a helper
// that parked there would arrive late at the next section. An idle graph
// burns no CPU.
type team struct {
	helpers int // goroutines 1..helpers

	job   atomic.Uint64 // generation<<16 | n; generation 0: none yet
	body  body
	total int
	done  atomic.Int32 // helpers finished with the current job
	// caught is the first panic of a helper in the current job.
	caught atomic.Pointer[caughtPanic]

	idle   spin.Sleepers // helpers waiting for a job
	finish spin.Sleepers // the caller waiting for the reports

	// hot is set while the graph runs (hold): waiting threads poll
	// without parking.
	hot atomic.Bool

	mu      sync.Mutex // guards started, closed and the helpers' start
	started bool
	closed  atomic.Bool
	wg      sync.WaitGroup
}

// caughtPanic carries a helper's panic value to the caller.
type caughtPanic struct{ v any }

// maxWorkers is the most workers a job word can name; a team has at most
// maxWorkers-1 helpers.
const maxWorkers = 1<<16 - 1

// closedJob is the job word that tells the helpers to return.
const closedJob = ^uint64(0)

// newTeam returns a team of helpers goroutines, started by the first
// parallel section that needs them; nil for none.
func newTeam(helpers int) *team {
	if helpers < 1 {
		return nil
	}
	return &team{helpers: min(helpers, maxWorkers-1)}
}

// open reports whether the team can run a job on n workers, starting the
// helpers on the first call: false once closed, or when n-1 exceeds its
// helpers.
func (t *team) open(n int) bool {
	if n-1 > t.helpers || t.closed.Load() {
		return false
	}
	if t.job.Load() == 0 {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed.Load() {
			return false
		}
		if !t.started {
			t.started = true
			for w := 1; w <= t.helpers; w++ {
				t.wg.Add(1)
				go t.helper(w)
			}
		}
	}
	return true
}

// run publishes a job on n workers, runs chunk 0, and waits for the
// helpers' reports; a helper's panic is raised again here, unless the
// caller's own chunk panicked.
func (t *team) run(n, total int, b body) {
	t.body, t.total = b, total
	t.done.Store(0)
	gen := t.job.Load()>>16 + 1
	t.job.Store(gen<<16 | uint64(n))
	t.idle.Wake()
	ok := false
	defer func() {
		t.join(n)
		if p := t.caught.Swap(nil); p != nil && ok {
			panic(p.v)
		}
	}()
	b.chunk(0, total/n, 0)
	ok = true
}

// join waits until the n-1 helpers of the current job have reported.
func (t *team) join(n int) {
	want := int32(n - 1)
	s := spin.Spinner{Budget: spin.For}
	for t.done.Load() < want {
		if !s.More() {
			if t.hot.Load() {
				s = spin.Spinner{Budget: spin.For}
				continue
			}
			t.finish.Wait(func() bool { return t.done.Load() >= want })
		}
	}
	t.body = nil // the team keeps no kernel past the call
}

// helper is helper w's loop: wait for a job after the last one seen, run
// its chunk when w < n, report; return when the team closes.
func (t *team) helper(w int) {
	defer t.wg.Done()
	var seen uint64
	for {
		job := t.next(seen)
		if job == closedJob {
			return
		}
		seen = job
		n := int(job & maxWorkers)
		if w >= n {
			continue
		}
		t.chunk(w, n)
		if t.done.Add(1) == int32(n-1) {
			t.finish.Wake()
		}
	}
}

// chunk runs helper w's chunk of the current job on n workers, catching a
// panic for the caller.
func (t *team) chunk(w, n int) {
	defer func() {
		if v := recover(); v != nil {
			t.caught.CompareAndSwap(nil, &caughtPanic{v})
		}
	}()
	t.body.chunk(t.total*w/n, t.total*(w+1)/n, w)
}

// next returns the first job word other than seen: it polls, and parks
// once spin.For has passed outside a hold, until one is published.
func (t *team) next(seen uint64) uint64 {
	s := spin.Spinner{Budget: spin.For}
	for {
		if j := t.job.Load(); j != seen {
			return j
		}
		if !s.More() {
			if !t.hot.Load() {
				t.idle.Wait(func() bool { return t.job.Load() != seen || t.hot.Load() })
			}
			s = spin.Spinner{Budget: spin.For}
		}
	}
}

// hold keeps the helpers (and the caller between sections' chunks)
// polling instead of parking until release, waking the parked ones: the
// graph's Run holds its team for a step. Past a few thousand polls a
// poller yields its P to other goroutines (spin.Spinner), so the holder
// progresses with fewer Ps than workers. Nil-safe.
func (t *team) hold() {
	if t == nil {
		return
	}
	t.hot.Store(true)
	t.idle.Wake()
}

// release ends a hold: waiting threads park again after spin.For.
// Nil-safe.
func (t *team) release() {
	if t != nil {
		t.hot.Store(false)
	}
}

// close stops the helpers and waits for them to return; the team runs
// later jobs on the caller. It must not overlap a run.
func (t *team) close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return
	}
	t.closed.Store(true)
	started := t.started
	t.mu.Unlock()
	if started {
		t.job.Store(closedJob)
		t.idle.Wake()
		t.wg.Wait()
	}
}

// teamFor returns the team of a graph with threads workers, stopped when
// the graph (owner) is closed or, failing that, collected: a helper refers
// to the team only, so an unreachable graph does not keep it alive, and a
// graph is reachable while its kernels run (Graph.Run reads its outputs
// afterwards), so the cleanup never overlaps a job.
func teamFor(owner *Graph, threads int) *team {
	t := newTeam(threads - 1)
	if t != nil {
		runtime.AddCleanup(owner, func(t *team) { t.close() }, t)
	}
	return t
}
