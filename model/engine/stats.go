package engine

import "sync/atomic"

// Stats says how an engine has run its calls since it was made: how many
// windows it split across its threads, how often the calling thread had to
// park waiting for a helper's chunk of a split window (a sign that another
// thread or process held the helper's core), and how often the contention
// back-off (see Engine.dispatch) made it run every window whole. Counters
// only grow.
type Stats struct {
	// Calls counts Predict and Logits calls; Windows the windows computed.
	Calls, Windows int64
	// SplitWindows counts windows split across the threads layer by layer;
	// the rest ran whole, one thread each.
	SplitWindows int64
	// Parks counts the calling thread's waits for the end of a split
	// window's phase that ended parked: a helper held a chunk for longer
	// than the spin budget.
	Parks int64
	// Backoffs counts the back-offs; BackoffCalls the calls run whole
	// because of them.
	Backoffs, BackoffCalls int64
	// ReusedWindows counts windows that carried block 0's rows over from
	// their cell's previous window (see SetReuse).
	ReusedWindows int64
	// Expects counts the Expect calls that kept the helpers polling for
	// a batch announced ahead.
	Expects int64
	// BackingOff reports whether the engine is in a back-off now.
	BackingOff bool
	// Threads is the number of threads a call runs on.
	Threads int
	// BF16 reports whether the bf16 GEMM path serves (SetPrecision): in
	// BF16, and in INT8 for the layers int8 leaves to it; INT8 whether the
	// int8 path serves the widest layers.
	BF16, INT8 bool
}

// counters holds Stats' counters, written by the calling goroutine and read
// by any (a metrics scrape runs beside the serving loop).
type counters struct {
	calls, windows, split, parks, backoffs, backoffCalls, reused, expects atomic.Int64
	backingOff                                                            atomic.Bool
}

// Stats returns the engine's counters. It is safe to call concurrently with
// Predict.
func (e *Engine) Stats() Stats {
	c := &e.stats
	s := Stats{
		Calls: c.calls.Load(), Windows: c.windows.Load(), SplitWindows: c.split.Load(),
		Parks: c.parks.Load(), Backoffs: c.backoffs.Load(), BackoffCalls: c.backoffCalls.Load(),
		ReusedWindows: c.reused.Load(), Expects: c.expects.Load(),
		BackingOff: c.backingOff.Load(), Threads: len(e.workers),
	}
	p := e.Precision()
	s.BF16, s.INT8 = p == BF16 || p == INT8, p == INT8
	return s
}
