package engine

import (
	"time"

	"rgcpred/rgc"
)

// helper is the loop of the goroutine running worker i >= 1.
func (e *Engine) helper(i int) {
	defer e.wg.Done()
	var seen uint32
	for {
		seen = e.team.next(seen)
		if e.team.quit.Load() {
			return
		}
		e.run(i, &e.shared)
		e.team.report()
	}
}

// job is one chunk of a call: its windows, their embedding rows and
// outputs, how many run whole, and the first ticket of its phases.
type job struct {
	inputs []float32
	rows   []int     // embedding row of each window of the chunk
	plans  []plan    // how each window runs its stem and block 0
	out    []float32 // per-window outputs of width outW
	outW   int
	probs  bool
	whole  int    // windows 0..whole run whole, one thread each; the rest split
	base   uint64 // the first ticket of the chunk's phases
}

// dispatch runs windows 0..n of the current chunk on the workers. With t
// threads, the first n - n%t windows run whole, one per thread at a time
// (no synchronisation inside a window: the best throughput); each of the
// remaining n%t windows is split across all threads phase by phase (see
// pass), so that a batch smaller than the thread count leaves no running
// core idle.
//
// The helpers join a call when they have reported the previous one;
// otherwise (a helper descheduled since) the caller runs the call alone,
// every window whole. A call whose windows would all be split (fewer than
// the threads) that finds a helper parked either runs alone or wakes the
// helpers, whichever has taken less time on average for such calls (a
// running mean of each): a woken helper arrives late and works from a
// cold core, which on a virtual machine makes a short window no faster at
// the median and much slower in the tail (BenchmarkPaced:
// docs/results.md), while a long window still gains. Every relearnCalls-th
// such call goes the other way, to keep both means current. The helpers
// join a lone window while they still poll after the previous call
// (spinFor), and always join batches with a window per thread.
//
// Splitting pays only when the threads run at the
// same time: when the caller, waiting for a helper's chunk, ends up parked
// more than twice per split window for contendedCalls consecutive calls,
// the engine runs every window whole for a back-off of backoffCalls calls
// (a batch of 1 on the calling thread alone), then tries splitting again;
// each back-off that ends in contention again doubles the next, up to
// maxBackoffCalls.
func (e *Engine) dispatch(n int) {
	t := len(e.workers)
	c := &e.cur
	c.whole = n - n%t
	if e.splitAll {
		c.whole = 0
	}
	if e.backoff > 0 {
		e.backoff--
		c.whole = n
		e.stats.backoffCalls.Add(1)
		e.stats.backingOff.Store(e.backoff > 0)
	}
	e.stats.windows.Add(int64(n))
	lone := c.whole == 0 && !e.splitAll && !e.wakeParked && e.team != nil && e.team.ready() && e.team.parked()
	alone := false
	var t0 time.Time
	if lone {
		e.loneCalls++
		alone = e.loneAlone <= e.loneWoken
		if e.loneCalls%relearnCalls == 0 {
			alone = !alone
		}
		t0 = time.Now()
	}
	if e.team == nil || e.solo || n == 1 && c.whole == 1 || !e.team.ready() || alone {
		// Alone: every window whole on the calling thread.
		wk := e.workers[0]
		p := pass{wk: wk, a: wk.acts}
		for w := 0; w < n; w++ {
			e.window(&p, c, w)
			if w < n-1 {
				e.handOver()
			}
		}
		if lone {
			runningMean(&e.loneAlone, time.Since(t0))
		}
		return
	}
	split := n - c.whole
	e.stats.split.Add(int64(split))
	c.base = e.tk.next.Load() // every ticket so far is claimed and done
	e.shared = *c
	e.shared.rows = e.sharedRows[:len(c.rows)]
	copy(e.shared.rows, c.rows)
	e.shared.plans = e.sharedPlans[:len(c.plans)]
	copy(e.shared.plans, c.plans)
	e.team.start()
	e.run(0, c)
	if lone {
		runningMean(&e.loneWoken, time.Since(t0))
	}
	// Waits for a helper's whole window are not contention: only split
	// windows' waits are counted and judged.
	parks := e.tk.parks.Swap(0)
	if split == 0 {
		return
	}
	e.stats.parks.Add(parks)
	if parks <= int64(2*split) {
		e.contended, e.nextBackoff = 0, backoffCalls
		return
	}
	if e.contended++; e.contended >= contendedCalls {
		e.contended = 0
		e.backoff = e.nextBackoff
		e.nextBackoff = min(2*e.nextBackoff, maxBackoffCalls)
		e.stats.backoffs.Add(1)
		e.stats.backingOff.Store(true)
	}
}

// relearnCalls is how often a lone call with the helpers parked goes the
// way that has been slower (see dispatch).
const relearnCalls = 256

// runningMean moves the running mean m an eighth of the way to d (to d
// itself at the first sample).
func runningMean(m *time.Duration, d time.Duration) {
	if *m == 0 {
		*m = d
		return
	}
	*m += (d - *m) / 8
}

// Contention back-off (see dispatch).
const (
	contendedCalls  = 3
	backoffCalls    = 200
	maxBackoffCalls = 6400
)

// run is worker i's share of job j: the whole windows it claims, then its
// chunks of each split window. It returns once every window is done
// (worker 0, the caller) or once it has nothing left to claim (a helper).
func (e *Engine) run(i int, j *job) {
	wk := e.workers[i]
	t := len(e.workers)
	ctl := pass{wk: wk, tk: e.tk, threads: t, lead: i == 0, end: j.base, synced: true}
	whole := pass{wk: wk, a: wk.acts}
	// The caller hands over the windows finished so far (PredictEach)
	// between the stages of its own and after each, except the call's
	// last: do hands that over.
	if i == 0 && e.each != nil {
		whole.between = e.handOverFn
	}
	last := len(j.rows) - 1
	for c := ctl.windows(j.whole); c.next(); {
		for w := c.lo; w < c.hi; w++ {
			e.window(&whole, j, w)
			if i == 0 && w < last {
				e.handOver()
			}
		}
	}
	// The split windows share worker 0's activations, which its whole
	// windows use too.
	ctl.sync()
	split := ctl
	split.a = e.workers[0].acts
	for w := j.whole; w < len(j.rows); w++ {
		if i == 0 {
			e.handOver()
		}
		e.window(&split, j, w)
	}
}

// window runs p's share of the forward pass of window i of job j.
func (e *Engine) window(p *pass, j *job, i int) {
	input := j.inputs[i*rgc.WindowLen : (i+1)*rgc.WindowLen]
	dst := j.out[i*j.outW : (i+1)*j.outW]
	e.net.forward(p, input, j.rows[i], &j.plans[i], dst, j.probs)
	// The window is final: a whole window's thread marks it before it
	// finishes its ticket (the caller's sync waits for that); a split
	// window is marked by the caller, whose pass ends synced (a helper's
	// mark could land after the call and in the next one's flags).
	if p.tk == nil || p.lead {
		e.finished[i].Store(true)
	}
}
