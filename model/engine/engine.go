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
// Threads: a batch of n windows on t threads runs n - n%t windows whole and
// splits the rest, so a batch of 1 (the real-time case) uses every core
// that is running.
//   - Whole windows run each on one thread with its own buffers (the best
//     throughput), claimed one at a time by whichever thread is free.
//   - A split window runs phase by phase: the rows of every convolution,
//     the transformer's tokens and the squeeze-excite channels are cut into
//     chunks the threads claim one at a time; a phase that reads rows
//     another thread wrote starts once the previous one is done (25 phases
//     per window for gpt-a, 33 for gpt-b).
//   - A call with fewer windows than threads is split only if the helpers
//     are still awake from the previous call or waking them has paid for
//     such calls so far (see dispatch).
//   - The caller never waits for a thread to arrive: a late helper (waking
//     up, or descheduled by the host) costs it at most a chunk in progress.
//   - The cut does not change the arithmetic of any output element: results
//     are bit-identical for any thread count.
//
// Carry-over: a window that is its cell's previous window moved on by a
// multiple of 4 bins (the daemon's and the rollout's next window) takes the
// stem's and block 0's rows it shares with that window from it and computes
// only those near its two ends (reuse.go, docs/engine.md "Carrying block 0
// over"). The shared bins are checked bit for bit; outputs are the same
// bits either way.
//
// # Backend seam
//
// The daemon, the rollout and the evaluator depend only on rgc.Predictor
// (Predict(batch, out)); Backend adds what a serving loop needs (MaxBatch,
// Close). Engine is the CPU Backend. model/gpu's Engine is the GPU
// Backend: it takes the same *model.Checkpoint and the weights this
// package prepares (Prepared). Loaders choose one at start-up by the
// --backend flag (serve/modelload, bench, evaluation).
package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"rgcpred/model"
	"rgcpred/rgc"
)

// Backend is anything that can serve predictions: the CPU Engine here and
// the GPU Engine of model/gpu. Implementations need not be safe for
// concurrent use.
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

// Expect tells the engine that a call of n windows is likely within d, so
// that its helper threads poll for it instead of parking and each takes a
// window from the call's start (a parked thread takes 0.1-0.3 ms to wake on
// a virtual machine; docs/engine.md, "Expected calls"). It implements
// rgc.Expecter, which the daemon core calls after each frames message.
//   - It acts only when n >= 2 and the engine has helpers; a lone window is
//     left to dispatch's rule of running alone or waking the helpers.
//   - The helpers poll until the call starts or d has passed, yielding
//     their cores to any other runnable thread meanwhile: a call that does
//     not come costs at most d of polling.
//   - It returns at once, allocates nothing and is safe to call
//     concurrently with Predict.
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
// done(n) as windows 0..n-1 become final, so that the caller can act on the
// first windows of a batch while the threads compute the rest (the daemon
// publishes their decisions).
//   - done runs on the calling goroutine, between its windows and between
//     the stages (CNN blocks, transformer layers) of those it runs whole: a
//     batch of 5 on 2 threads hands over its windows in three parts, at
//     about 2/5, 4/5 and all of the call.
//   - The time done takes is the caller's thread's, not the helpers': keep
//     it short.
//   - The outputs are Predict's, bit for bit.
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
