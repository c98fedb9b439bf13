// Package engine is the real-time inference engine: it loads a checkpoint
// of the model of docs/model.md section 2,
// head(gpt(cnn(input) + embed(cell))), and computes the 81 class
// probabilities for batches of windows on the CPU, with nothing wasted.
//
// At load time batch norm (running statistics, eps 1e-5) is folded into the
// convolutions, every weight matrix is packed for the SGEMM micro-kernel
// (rgcpred/base/sgemm), and every buffer is allocated, so that a call
// allocates nothing. Activations are kept channels-last ([positions,
// channels]), which makes a strided, zero-padded convolution input its own
// im2col matrix: the GEMM reads overlapping rows in place.
//
// Threads: a batch of n windows on t threads runs n - n%t windows whole,
// each on one thread with its own buffers (the best throughput), claimed
// one at a time by whichever thread is free; each remaining window is
// split across the threads phase by phase (when a call has fewer windows
// than threads, only if the helpers are still awake from the previous call
// or waking them has paid for such calls so far, see dispatch): the
// rows of every convolution, the transformer's tokens and the
// squeeze-excite channels are cut into
// chunks that the threads claim one at a time, and a phase that reads rows
// another thread wrote starts once the previous one is done (25 phases per
// window for gpt-a, 33 for gpt-b). So a batch of 1 (the real-time case) uses every core
// that is running, and a helper that is late (waking up, or descheduled by
// the host) costs the caller nothing but a chunk in progress: the caller
// never waits for a thread to arrive. The cut does not change the
// arithmetic of any output element: results are bit-identical for any
// thread count.
//
// Carry-over: a window that is its cell's previous window moved on by a
// multiple of 4 bins (the daemon's and the rollout's next window) takes
// the stem's and block 0's rows it shares with that window from it, checked
// bit for bit on the bins, and computes only those near its two ends
// (reuse.go, docs/engine.md "Carrying block 0 over"); outputs are the
// same bits either way.
//
// # Backend seam
//
// The daemon, the rollout and the evaluator depend only on rgc.Predictor
// (Predict(batch, out)); Backend adds what a serving loop needs (MaxBatch,
// Close). Engine is the CPU Backend. A GPU backend would implement Backend
// too, taking the same *model.Checkpoint (model.Weights hold every tensor by
// name with the layouts documented on model.Config.Params), and be chosen at
// start-up where the daemon now calls engine.New.
package engine

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"rgcpred/base/sgemm"
	"rgcpred/model"
	"rgcpred/rgc"
)

// Backend is anything that can serve predictions: the CPU Engine here, a
// GPU implementation later. Implementations need not be safe for concurrent
// use.
type Backend interface {
	rgc.Predictor
	// MaxBatch is the largest batch processed in one pass; larger batches
	// are processed in chunks of this size.
	MaxBatch() int
	// Close releases the backend's threads and memory.
	Close() error
}

var _ Backend = (*Engine)(nil)

// Engine runs the model's forward pass. It is not safe for concurrent use:
// give each serving goroutine its own Engine (they can share nothing but
// the checkpoint).
type Engine struct {
	cfg      model.Config
	net      *network
	rowOf    map[int]int // cluster id -> embedding row
	maxBatch int

	workers []*worker // workers[0] runs on the calling goroutine
	team    *team     // hands jobs to workers 1.. (nil with one thread)
	tk      *tickets  // the chunks of the calls' phases
	wg      sync.WaitGroup

	// cur is the call in progress, as the caller runs it; shared is the
	// copy the helpers read (with its own embedding rows), rewritten only
	// when every helper has reported the previous job.
	cur, shared job
	sharedRows  []int
	rows        []int // maxBatch embedding rows
	sharedPlans []plan
	winPlans    []plan // maxBatch plans of the call's windows
	// finished marks the current chunk's windows whose outputs are final;
	// each, if not nil, is PredictEach's done, told of them in order:
	// windows 0..eachN of the chunk starting at window eachOff are told.
	finished       []atomic.Bool
	each           func(n int)
	eachOff, eachN int
	handOverFn     func() // handOver, made once

	// Carrying block 0 over from a cell's previous window (reuse.go):
	// the rows each shift computes, the rows kept per embedding row (nil:
	// off) and the number of the current call.
	plans []rowPlan
	cells []cellRows
	call  uint64
	// splitAll makes every window split across the threads (benchmarks
	// compare it with one window per thread for batches of 2); wakeParked
	// makes a lone window wake parked helpers to split it (tests of the
	// split path; see dispatch).
	splitAll, wakeParked bool
	// solo runs every call on the calling thread alone (the parity check,
	// which a reload runs at low priority: the helpers would not be).
	solo bool
	// Calls whose windows would all be split and that found the helpers
	// parked (see dispatch): how many, and the running means of their
	// time run alone and with the helpers woken.
	loneCalls            int
	loneAlone, loneWoken time.Duration
	// Contention back-off (see dispatch): calls left that run every window
	// whole, consecutive contended calls, and the next back-off's length.
	backoff, contended, nextBackoff int
	closed                          bool
	stats                           counters // see Stats
}

// New returns an engine for a checkpoint, processing up to maxBatch windows
// per pass on threads threads (both at least 1).
func New(ck *model.Checkpoint, maxBatch, threads int) (*Engine, error) {
	if ck == nil {
		return nil, errors.New("engine: nil checkpoint")
	}
	if err := ck.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return NewFromWeights(ck.Weights, ck.CellIDs, maxBatch, threads)
}

// NewFromWeights returns an engine for weights whose embedding row i belongs
// to the cell with cluster id cellIDs[i].
func NewFromWeights(w *model.Weights, cellIDs []int, maxBatch, threads int) (*Engine, error) {
	if w == nil {
		return nil, errors.New("engine: nil weights")
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	cfg := w.Config
	if len(cellIDs) != cfg.NumCells {
		return nil, fmt.Errorf("engine: %d cell ids for %d embedding rows", len(cellIDs), cfg.NumCells)
	}
	if maxBatch < 1 || threads < 1 {
		return nil, fmt.Errorf("engine: maxBatch %d and threads %d must be >= 1", maxBatch, threads)
	}
	rowOf := make(map[int]int, len(cellIDs))
	for i, id := range cellIDs {
		if j, dup := rowOf[id]; dup {
			return nil, fmt.Errorf("engine: cell id %d on embedding rows %d and %d", id, j, i)
		}
		rowOf[id] = i
	}
	e := &Engine{
		// A private copy: later changes to w (training goes on) must not
		// reach the engine half-way.
		cfg: cfg, net: newNetwork(w.Clone()), rowOf: rowOf, maxBatch: maxBatch,
		rows: make([]int, maxBatch), sharedRows: make([]int, maxBatch), tk: newTickets(), nextBackoff: backoffCalls,
		winPlans: make([]plan, maxBatch), sharedPlans: make([]plan, maxBatch),
		finished: make([]atomic.Bool, maxBatch),
	}
	e.handOverFn = e.handOver
	e.plans = e.net.rowPlans()
	e.SetReuse(true)
	for i := 0; i < threads; i++ {
		e.workers = append(e.workers, newWorker(e.net))
	}
	if threads > 1 {
		e.team = newTeam(threads - 1)
		for i := 1; i < threads; i++ {
			e.wg.Add(1)
			go e.helper(i)
		}
	}
	return e, nil
}

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

// Expect tells the engine that a call of n windows is likely within d. When
// n is at least 2 and the engine has helper threads, they poll for the
// next call instead of parking, until it starts or d has passed, yielding
// their cores to any other runnable thread meanwhile, so that each takes a
// window from the call's start: a parked thread takes 0.1-0.3 ms to wake
// on a virtual machine, and by then the caller has run the window it
// would have run (docs/engine.md, "Expected calls"). A lone window is left
// to dispatch's rule of running alone or waking the helpers. Expect
// returns at once, allocates nothing and is safe to call concurrently with
// Predict; a call that does not come costs at most d of polling. It
// implements rgc.Expecter, which the daemon core calls after each frames
// message.
func (e *Engine) Expect(n int, d time.Duration) {
	if e.team == nil || n < 2 || d <= 0 {
		return
	}
	e.stats.expects.Add(1)
	e.team.expect(time.Now().Add(d).UnixNano())
}

// setSpin sets how long waiting threads poll before parking.
func (e *Engine) setSpin(d time.Duration) {
	e.tk.spin.Store(int64(d))
	if e.team != nil {
		e.team.idle.Store(int64(d))
	}
}

// Config returns the model configuration the engine runs.
func (e *Engine) Config() model.Config { return e.cfg }

// MaxBatch returns the largest number of windows processed in one pass.
func (e *Engine) MaxBatch() int { return e.maxBatch }

// Threads returns the number of threads a batch is split across.
func (e *Engine) Threads() int { return len(e.workers) }

// Close stops the engine's helper goroutines. The engine must not be used
// afterwards.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	if e.team != nil {
		e.team.quit.Store(true)
		e.team.start()
		e.wg.Wait()
	}
	return nil
}

// Predict implements rgc.Predictor: it writes the NumClasses class
// probabilities of window i to out[i*NumClasses:(i+1)*NumClasses].
func (e *Engine) Predict(b *rgc.Batch, out []float32) error {
	return e.do(b, out, true)
}

// PredictEach implements rgc.Progressive: it is Predict, and it calls
// done(n) on the calling goroutine, between its windows and between the
// stages (CNN blocks, transformer layers) of those it runs whole, as
// windows 0..n-1 become final, so that the caller can act on the first windows of
// a batch while the threads compute the rest (the daemon publishes their
// decisions). A batch of 5 on 2 threads hands over its windows in three
// parts, at about 2/5, 4/5 and all of the call. The time done takes is
// the caller's thread's, not the helpers': keep it short. The outputs are
// Predict's, bit for bit.
func (e *Engine) PredictEach(b *rgc.Batch, out []float32, done func(n int)) error {
	e.each = done
	defer func() { e.each = nil }() // also when done panics
	return e.do(b, out, true)
}

// handOver tells PredictEach's done of the current chunk's windows that
// became final, in order.
func (e *Engine) handOver() {
	if e.each == nil {
		return
	}
	k := e.eachN
	for k < len(e.cur.rows) && e.finished[k].Load() {
		k++
	}
	if k > e.eachN {
		e.eachN = k
		e.each(e.eachOff + k)
	}
}

// Logits writes the raw head outputs of each window (Config.HeadOut values:
// 81 logits for cat, 3 x Mixtures mixture parameters for logmix) to
// out[i*HeadOut:(i+1)*HeadOut].
func (e *Engine) Logits(b *rgc.Batch, out []float32) error {
	return e.do(b, out, false)
}

func (e *Engine) do(b *rgc.Batch, out []float32, probs bool) error {
	if e.closed {
		return errors.New("engine: closed")
	}
	if err := b.Check(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	outW := e.cfg.HeadOut()
	if probs {
		outW = e.cfg.Classes
	}
	n := b.Len()
	if len(out) < n*outW {
		return fmt.Errorf("engine: output of %d floats for %d windows x %d", len(out), n, outW)
	}
	e.stats.calls.Add(1)
	for lo := 0; lo < n; lo += e.maxBatch {
		hi := min(lo+e.maxBatch, n)
		for i := lo; i < hi; i++ {
			r, ok := e.rowOf[b.Cells[i]]
			if !ok {
				return fmt.Errorf("engine: window %d: unknown cell id %d (model %s knows %d cells)", i, b.Cells[i], e.cfg.Name(), len(e.rowOf))
			}
			e.rows[i-lo] = r
		}
		e.call++
		for i := lo; i < hi; i++ {
			e.winPlans[i-lo] = e.plan(b.Inputs[i*rgc.WindowLen:(i+1)*rgc.WindowLen], b.Ends[i], e.rows[i-lo], e.call)
		}
		e.cur.inputs = b.Inputs[lo*rgc.WindowLen : hi*rgc.WindowLen]
		e.cur.rows = e.rows[:hi-lo]
		e.cur.plans = e.winPlans[:hi-lo]
		e.cur.out = out[lo*outW : hi*outW]
		e.cur.outW = outW
		e.cur.probs = probs
		if e.each != nil {
			e.eachOff, e.eachN = lo, 0
			for i := range hi - lo {
				e.finished[i].Store(false)
			}
		}
		e.dispatch(hi - lo)
		e.handOver()
	}
	return nil
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

// ---------------------------------------------------------------------------
// Prepared weights.

// conv is a 1-D convolution with batch norm folded in, as a GEMM over
// channels-last activations: out[l, o] = bias[o] + sum over (t, i) of
// in[l*stride + t, i] * w[t*cin + i, o], where in is zero-padded by pad
// positions on both sides.
type conv struct {
	k, stride, pad, cin, cout int
	w                         *sgemm.PackedB    // [k*cin, cout]
	w16                       *sgemm.PackedBF16 // bf16 copy of w; nil: float32 path
	w8                        *sgemm.PackedI8   // int8 copy of w; nil: the float paths
	// taps are int8 copies of w's k taps ([cin, cout] each), for an input
	// quantized with a scale per position; nil: the other paths.
	taps []*sgemm.PackedI8
	bias []float32 // [cout]
}

// newConv folds batch norm prefix (weight, bias, running_mean, running_var)
// into the kernel [cout, cin, k] called name.
func newConv(w *model.Weights, name, bn string, stride int) conv {
	spec := paramSpec(w.Config, name)
	cout, cin, k := spec.Shape[0], spec.Shape[1], spec.Shape[2]
	kern := w.Get(name)
	gamma, beta := w.Get(bn+".weight"), w.Get(bn+".bias")
	mean, vr := w.Get(bn+".running_mean"), w.Get(bn+".running_var")
	b := make([]float32, k*cin*cout)
	bias := make([]float32, cout)
	for o := 0; o < cout; o++ {
		scale := float64(gamma[o]) / math.Sqrt(float64(vr[o])+model.BNEps)
		bias[o] = float32(float64(beta[o]) - float64(mean[o])*scale)
		for i := 0; i < cin; i++ {
			for t := 0; t < k; t++ {
				b[(t*cin+i)*cout+o] = float32(float64(kern[(o*cin+i)*k+t]) * scale)
			}
		}
	}
	return conv{k: k, stride: stride, pad: k / 2, cin: cin, cout: cout,
		w: sgemm.NewPackedB(false, k*cin, cout, b, cout), bias: bias}
}

// apply computes output positions lo..hi from the padded input in (row 0
// is the first padding row) into rows lo..hi of out (row stride cout),
// followed by ReLU when relu is set; bias and ReLU are fused into the
// GEMM's store.
func (c *conv) apply(in []float32, lo, hi int, out []float32, relu bool, work []float32) {
	if hi <= lo {
		return
	}
	c.applyTo(in, lo, hi, out[lo*c.cout:], relu, work)
}

// applyTo is apply with output position lo written to row 0 of dst.
func (c *conv) applyTo(in []float32, lo, hi int, dst []float32, relu bool, work []float32) {
	ld := c.stride * c.cin
	if c.w16 != nil {
		sgemm.GemmPackedBiasBF16(hi-lo, in[lo*ld:], ld, c.w16, c.bias, relu, dst, c.cout, work)
		return
	}
	sgemm.GemmPackedBias(hi-lo, in[lo*ld:], ld, c.w, c.bias, relu, dst, c.cout, work)
}

// ringRun is a run of output positions lo..hi that lands on consecutive
// rows of a ring from row.
type ringRun struct{ lo, hi, row int }

// ringRuns cuts positions lo..hi into the runs they take in a ring of n
// rows whose row base holds position 0 (position o goes to row
// (base+o) mod n): at most two, the second from row 0.
func ringRuns(lo, hi, base, n int) (runs [2]ringRun, k int) {
	wrap := n - base // the first position that wraps to row 0
	if lo < wrap && lo < hi {
		runs[k] = ringRun{lo, min(hi, wrap), base + lo}
		k++
	}
	if hi > wrap {
		a := max(lo, wrap)
		runs[k] = ringRun{a, hi, a - wrap}
		k++
	}
	return runs, k
}

// applyRing is apply into a ring of n rows whose row base holds output
// position 0 (ringRuns).
func (c *conv) applyRing(in []float32, lo, hi int, ring []float32, base, n int, relu bool, work []float32) {
	runs, k := ringRuns(lo, hi, base, n)
	for _, r := range runs[:k] {
		c.applyTo(in, r.lo, r.hi, ring[r.row*c.cout:], relu, work)
	}
}

// quantized is a convolution's input quantized to uint8, laid out as
// apply's in (row 0 the first padding row): position p stands for
// (q[p] - zero[p]) * scale[p], or q[p] * scale[0] for every position when
// perPos is false (no zero points then). Padding positions hold 0, with
// scale and zero point 0.
type quantized struct {
	q      []uint8
	scale  []float32
	zero   []int32
	perPos bool
}

// newQuantized makes room for rows positions of cols channels, with
// room for the GEMM kernels' groups of 4 bytes past the last.
func newQuantized(rows, cols int) quantized {
	return quantized{q: make([]uint8, rows*cols+4), scale: make([]float32, rows),
		zero: make([]int32, rows), perPos: true}
}

// set quantizes positions lo..hi of src (cols floats each, position p at
// src[(p-off)*cols:], off being the rows of padding before src's first)
// each with a scale and zero point of its own.
func (in *quantized) set(src []float32, lo, hi, cols, off int) {
	sgemm.QuantizeRowsU8(in.q[lo*cols:], cols, src[(lo-off)*cols:], cols, hi-lo, cols, in.scale[lo:], in.zero[lo:])
}

// from returns the scales and zero points of the positions first,
// first+stride, ..., with their strides.
func (in *quantized) from(first, stride int) (scale []float32, ss int, zero []int32, zs int) {
	if !in.perPos {
		return in.scale[:1], 0, nil, 0
	}
	return in.scale[first:], stride, in.zero[first:], stride
}

// applyI8 is apply on the int8 path (c.w8) from the quantized input in.
func (c *conv) applyI8(in *quantized, lo, hi int, out []float32, relu bool, work []float32) {
	if hi <= lo {
		return
	}
	c.applyI8To(in, lo, hi, out[lo*c.cout:], relu, work)
}

// applyI8To is applyI8 with output position lo written to row 0 of dst.
func (c *conv) applyI8To(in *quantized, lo, hi int, dst []float32, relu bool, work []float32) {
	ld := c.stride * c.cin
	sa, ss, za, zs := in.from(lo*c.stride, c.stride)
	sgemm.GemmPackedBiasI8(hi-lo, in.q[lo*ld:], ld, sa, ss, za, zs, c.w8, c.bias, relu, dst, c.cout, work)
}

// applyRingI8 is applyI8 into a ring of n rows whose row base holds output
// position 0 (ringRuns).
func (c *conv) applyRingI8(in *quantized, lo, hi int, ring []float32, base, n int, relu bool, work []float32) {
	runs, k := ringRuns(lo, hi, base, n)
	for _, r := range runs[:k] {
		c.applyI8To(in, r.lo, r.hi, ring[r.row*c.cout:], relu, work)
	}
}

// applyTaps is apply on the int8 path tap by tap (c.taps), from an input
// quantized a position at a time: each output row sums the k taps'
// products, each scaled by its input position's scale, so that a row
// depends only on the positions it reads, whatever the others hold.
func (c *conv) applyTaps(in *quantized, lo, hi int, out []float32, relu bool, work []float32) {
	if hi <= lo {
		return
	}
	ld := c.stride * c.cin
	dst := out[lo*c.cout:]
	for t, w := range c.taps {
		a := in.q[(lo*c.stride+t)*c.cin:]
		sa, ss, za, zs := in.from(lo*c.stride+t, c.stride)
		last := relu && t == len(c.taps)-1
		if t == 0 {
			sgemm.GemmPackedBiasI8(hi-lo, a, ld, sa, ss, za, zs, w, c.bias, last, dst, c.cout, work)
			continue
		}
		sgemm.GemmPackedAccI8(hi-lo, a, ld, sa, ss, za, zs, w, last, dst, c.cout, work)
	}
}

// newTaps quantizes c's taps for applyTaps.
func (c *conv) newTaps() []*sgemm.PackedI8 {
	w := c.w.Dense()
	taps := make([]*sgemm.PackedI8, c.k)
	for t := range taps {
		taps[t] = sgemm.NewPackedI8(false, c.cin, c.cout, w[t*c.cin*c.cout:], c.cout)
	}
	return taps
}

// linear is y = x W + b with W [in, out].
type linear struct {
	in, out int
	w       *sgemm.PackedB
	w16     *sgemm.PackedBF16 // bf16 copy of w; nil: float32 path
	w8      *sgemm.PackedI8   // int8 copy of w; nil: the float paths
	bias    []float32
}

func newLinear(w *model.Weights, prefix string) linear {
	spec := paramSpec(w.Config, prefix+".weight")
	in, out := spec.Shape[0], spec.Shape[1]
	return linear{in: in, out: out, w: sgemm.NewPackedB(false, in, out, w.Get(prefix+".weight"), out),
		bias: append([]float32(nil), w.Get(prefix+".bias")...)}
}

// apply computes rows x (rows x in, row stride ldx) into y (rows x out, row
// stride ldy).
func (f *linear) apply(rows int, x []float32, ldx int, y []float32, ldy int, work []float32) {
	if f.w8 != nil {
		f.applyI8(rows, x, ldx, y, ldy, work)
		return
	}
	if f.w16 != nil {
		sgemm.GemmPackedBiasBF16(rows, x, ldx, f.w16, f.bias, false, y, ldy, work)
		return
	}
	sgemm.GemmPackedBias(rows, x, ldx, f.w, f.bias, false, y, ldy, work)
}

// applyI8 is apply on the int8 path: each row of x quantized to uint8
// with a scale and zero point of its own (sgemm.QuantizeRowsU8), in
// work, as many rows at a time as fit there.
func (f *linear) applyI8(rows int, x []float32, ldx int, y []float32, ldy int, work []float32) {
	const tileLen = 12 * 32
	tile, rest := work[:tileLen], work[tileLen:]
	ld := (f.in + 3) &^ 3 // a quantized row: groups of 4 bytes
	block := min(rows, len(rest)/(ld/4+2))
	for lo := 0; lo < rows; lo += block {
		n := min(block, rows-lo)
		q := unsafe.Slice((*uint8)(unsafe.Pointer(&rest[0])), n*ld)
		scale := rest[n*ld/4 : n*ld/4+n]
		zero := unsafe.Slice((*int32)(unsafe.Pointer(&rest[n*ld/4+n])), n)
		sgemm.QuantizeRowsU8(q, ld, x[lo*ldx:], ldx, n, f.in, scale, zero)
		sgemm.GemmPackedBiasI8(n, q, ld, scale, 1, zero, 1, f.w8, f.bias, false, y[lo*ldy:], ldy, tile)
	}
}

// matvec computes y = x W + b for one row with a plain loop (cheaper than a
// GEMM for the tiny squeeze-excite layers).
func (f *linear) matvec(x, y []float32, w []float32) {
	copy(y[:f.out], f.bias)
	matvecAdd(x[:f.in], w[:f.in*f.out], y[:f.out])
}

// block is a bottleneck block with squeeze-excite.
type block struct {
	stride, in, mid, out, lIn, lOut int
	conv1, conv2, conv3             conv
	shortcut                        *conv // nil: identity
	se1, se2                        linear
	se1w, se2w                      []float32 // raw [in, out] weights for matvec
}

// layer is a GPT-2 transformer block.
type layer struct {
	ln1w, ln1b, ln2w, ln2b []float32
	qkv, proj, fc, mproj   linear
}

// network holds the prepared weights; read-only, shared by the workers.
type network struct {
	cfg                     model.Config
	conv1, conv2            conv
	blocks                  []block
	proj                    *linear // nil unless Config.HasProj
	cellEmb, posEmb         []float32
	layers                  []layer
	lnfw, lnfb              []float32
	head                    linear
	tokens, width, headDim  int
	conv1Out, stemLen, bins int
	arith                   Precision           // the arithmetic in effect (precision.go)
	w16                     []*sgemm.PackedBF16 // bf16 weights once prepared
	w8                      []*sgemm.PackedI8   // int8 weights once prepared
	taps                    []*sgemm.PackedI8   // block 0's conv2 taps in int8, once prepared
	tap3                    *sgemm.PackedI8     // block 0's conv3 in int8, once prepared
}

func paramSpec(c model.Config, name string) model.ParamSpec {
	for _, p := range c.Params() {
		if p.Name == name {
			return p
		}
	}
	panic("engine: no parameter " + name) // Weights.Check passed: unreachable
}

func newNetwork(w *model.Weights) *network {
	c := w.Config
	n := &network{cfg: c, tokens: c.Tokens(), width: c.Width(), headDim: c.HeadDim, bins: c.InBins, arith: FP32}
	n.conv1 = newConv(w, "cnn.conv1.weight", "cnn.bn1", 2)
	n.conv2 = newConv(w, "cnn.conv2.weight", "cnn.bn2", 1)
	n.stemLen = c.InBins / 2
	l := n.stemLen
	for i := 0; i < c.NumBlocks(); i++ {
		p := fmt.Sprintf("cnn.blocks.%d", i)
		s := c.BlockStride(i)
		b := block{stride: s, in: c.BlockIn(i), mid: c.BlockMid, out: c.BlockOut, lIn: l, lOut: l / s,
			conv1: newConv(w, p+".conv1.weight", p+".bn1", 1),
			conv2: newConv(w, p+".conv2.weight", p+".bn2", s),
			conv3: newConv(w, p+".conv3.weight", p+".bn3", 1),
			se1:   newLinear(w, p+".se.fc1"), se2: newLinear(w, p+".se.fc2"),
			se1w: w.Get(p + ".se.fc1.weight"), se2w: w.Get(p + ".se.fc2.weight"),
		}
		if c.BlockHasShortcut(i) {
			sc := newConv(w, p+".shortcut.conv.weight", p+".shortcut.bn", s)
			b.shortcut = &sc
		}
		n.blocks = append(n.blocks, b)
		l /= s
	}
	if c.HasProj() {
		pr := newLinear(w, "gpt.proj")
		n.proj = &pr
	}
	n.cellEmb = w.Get("gpt.cell_emb")
	n.posEmb = w.Get("gpt.pos_emb")
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("gpt.blocks.%d", i)
		// Fold the attention scale 1/sqrt(head_dim) into the q columns of
		// qkv (w is the engine's private copy), so the score GEMM needs none.
		d, scale := c.Width(), float32(1/math.Sqrt(float64(c.HeadDim)))
		qw, qb := w.Get(p+".attn.qkv.weight"), w.Get(p+".attn.qkv.bias")
		for r := 0; r < d; r++ {
			for col := 0; col < d; col++ {
				qw[r*3*d+col] *= scale
			}
		}
		for col := 0; col < d; col++ {
			qb[col] *= scale
		}
		n.layers = append(n.layers, layer{
			ln1w: w.Get(p + ".ln1.weight"), ln1b: w.Get(p + ".ln1.bias"),
			ln2w: w.Get(p + ".ln2.weight"), ln2b: w.Get(p + ".ln2.bias"),
			qkv: newLinear(w, p+".attn.qkv"), proj: newLinear(w, p+".attn.proj"),
			fc: newLinear(w, p+".mlp.fc"), mproj: newLinear(w, p+".mlp.proj"),
		})
	}
	n.lnfw, n.lnfb = w.Get("gpt.ln_f.weight"), w.Get("gpt.ln_f.bias")
	n.head = newLinear(w, "head")
	return n
}

// ---------------------------------------------------------------------------
// Buffers.

type blockBuf struct {
	h1  []float32 // [pad + lIn + pad, mid], padding rows stay zero
	h2  []float32 // [lOut, mid]
	h3  []float32 // [lOut, out]
	sc  []float32 // [lOut, out] shortcut branch
	out []float32 // [lOut, out]

	// The int8 path's quantized convolution inputs, and the largest value
	// of each chunk of h1 at the chunk's first row (0 in its others).
	qx, qh1, qh2 quantized // [lIn, in], as h1, [lOut, mid]
	h1top        []float32 // [lIn]
}

// acts are the activations of one window, shared by the threads that
// compute it (each writes its own rows).
type acts struct {
	in     []float32 // [pad + bins + pad, InRows]
	c1     []float32 // [pad + stemLen + pad, stemCh]
	c2     []float32 // [stemLen, stemCh]
	blocks []blockBuf
	pool   []float32 // squeeze-excite: channel means

	x, h   []float32 // [tokens, width] residual stream and normalised copy
	qkv    []float32 // [tokens, 3 width]
	kt     []float32 // [width, tokens] keys transposed (fused attention)
	y      []float32 // [tokens, width] attention output (heads concatenated)
	mlp    []float32 // [tokens, 4 width]
	tmp    []float32 // [tokens, width]
	last   []float32 // [width] final normalised last token
	logits []float32 // head output of the window (Predict converts it)
}

// worker is one thread: its GEMM workspaces and small scratch, and the
// activations of the windows it runs whole.
type worker struct {
	work     []float32 // sgemm.GemmPacked(BiasBF16) workspace
	gemmWork []float32 // sgemm.GemmWork workspace
	att      []float32 // [tokens, tokens] attention weights of one head
	seHid    []float32 // squeeze-excite hidden layer
	seGate   []float32 // squeeze-excite channel gates
	acts     *acts
}

func newWorker(n *network) *worker {
	c := n.cfg
	d, t := n.width, n.tokens
	wk := &worker{
		work: make([]float32, max(sgemm.WorkSize(), sgemm.WorkSizeBF16())), gemmWork: make([]float32, sgemm.GemmWorkSize()),
		att: make([]float32, t*t), seHid: make([]float32, c.BlockOut/c.SEReduction),
		seGate: make([]float32, c.BlockOut),
	}
	a := &acts{
		in:   make([]float32, (n.bins+2*n.conv1.pad)*c.InRows),
		c1:   make([]float32, (n.stemLen+2*n.conv2.pad)*c.StemCh),
		c2:   make([]float32, n.stemLen*c.StemCh),
		pool: make([]float32, c.BlockOut),
		x:    make([]float32, t*d), h: make([]float32, t*d),
		qkv: make([]float32, t*3*d), kt: make([]float32, d*t),
		y: make([]float32, t*d), mlp: make([]float32, t*4*d),
		tmp: make([]float32, t*d), last: make([]float32, d),
		logits: make([]float32, c.HeadOut()),
	}
	for _, b := range n.blocks {
		a.blocks = append(a.blocks, blockBuf{
			h1: make([]float32, (b.lIn+2*b.conv2.pad)*b.mid),
			h2: make([]float32, b.lOut*b.mid), h3: make([]float32, b.lOut*b.out),
			sc: make([]float32, b.lOut*b.out), out: make([]float32, b.lOut*b.out),
			qx: newQuantized(b.lIn, b.in), qh1: newQuantized(b.lIn+2*b.conv2.pad, b.mid),
			qh2: newQuantized(b.lOut, b.mid), h1top: make([]float32, b.lIn),
		})
	}
	wk.acts = a
	return wk
}
