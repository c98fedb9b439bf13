package service

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/model/engine"
)

// statser is a predictor that says how it runs its calls (the CPU engine).
type statser interface{ Stats() engine.Stats }

// engineCollector exports the serving engine's counters (engine.Stats): how
// many windows ran split across its threads or whole, how many carried rows
// over from their cell's previous window, how often a split window's calling
// thread parked waiting for a helper, and the contention back-off. The
// counters of engines replaced by a reload are kept, so the exported
// counters only grow.
type engineCollector struct {
	model func() *Model

	mu      sync.Mutex
	retired engine.Stats // sums over the replaced engines

	windows, reused, parks, backoffs, backoffCalls, backingOff, expects, threads, bf16, int8 *prometheus.Desc
}

// newEngineCollector returns the collector of the engine model() returns.
func newEngineCollector(model func() *Model) *engineCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("predictord_engine_"+name, help, labels, nil)
	}
	return &engineCollector{
		model:        model,
		windows:      d("windows_total", "Windows the inference engine computed, by mode: split across its threads layer by layer (a lone window: the real-time case), or whole on one thread.", "mode"),
		reused:       d("reused_windows_total", "Windows that carried the CNN stem's and first block's rows over from their cell's previous window instead of computing them (bit for bit the same; model/engine SetReuse)."),
		parks:        d("parks_total", "Waits of the calling thread for a helper's chunk of a split window that ended parked: the helper held it longer than the spin budget (contention for the cores)."),
		backoffs:     d("backoffs_total", "Times the engine stopped splitting windows after calls whose waits for helpers parked."),
		backoffCalls: d("backoff_calls_total", "Calls the engine ran whole because of a contention back-off."),
		backingOff:   d("backing_off", "1 while the engine runs every window whole because of contention, else 0."),
		expects:      d("expects_total", "Batches the daemon core announced a frame ahead (rgc.Expecter) for which the engine kept its helper threads polling instead of parked, so that every thread starts the call at once."),
		threads:      d("threads", "Threads the inference engine runs a call on."),
		bf16:         d("bf16", "1 while the engine's convolutions and linear layers run in bf16 (predictord --precision bf16, or int8 for the layers it leaves to bf16, with the CPU's instructions and the parity check passed), 0 for fp32."),
		int8:         d("int8", "1 while the engine's widest layers run in int8 (predictord --precision int8, the default, with the CPU's instructions and the parity check passed), else 0."),
	}
}

// stats returns the current engine's counters, if the predictor has any.
func (c *engineCollector) stats() (engine.Stats, bool) {
	m := c.model()
	if m == nil {
		return engine.Stats{}, false
	}
	s, ok := m.Predictor.(statser)
	if !ok {
		return engine.Stats{}, false
	}
	return s.Stats(), true
}

// swap runs swap, which replaces the served model and returns the old one,
// and adds the old model's counters to the retired ones, both at once for
// Collect. The old model must serve no call any more.
func (c *engineCollector) swap(swap func() *Model) *Model {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := swap()
	if old == nil {
		return nil
	}
	s, ok := old.Predictor.(statser)
	if !ok {
		return old
	}
	st := s.Stats()
	r := &c.retired
	r.Windows += st.Windows
	r.SplitWindows += st.SplitWindows
	r.ReusedWindows += st.ReusedWindows
	r.Parks += st.Parks
	r.Backoffs += st.Backoffs
	r.BackoffCalls += st.BackoffCalls
	r.Expects += st.Expects
	return old
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.windows, c.reused, c.parks, c.backoffs, c.backoffCalls, c.backingOff, c.expects, c.threads, c.bf16, c.int8} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A predictor without counters
// (not the CPU engine) exports nothing.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	st, ok := c.stats()
	r := c.retired
	c.mu.Unlock()
	if !ok {
		return
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	split := st.SplitWindows + r.SplitWindows
	counter(c.windows, split, "split")
	counter(c.windows, st.Windows+r.Windows-split, "whole")
	counter(c.reused, st.ReusedWindows+r.ReusedWindows)
	counter(c.parks, st.Parks+r.Parks)
	counter(c.backoffs, st.Backoffs+r.Backoffs)
	counter(c.backoffCalls, st.BackoffCalls+r.BackoffCalls)
	counter(c.expects, st.Expects+r.Expects)
	flag := func(d *prometheus.Desc, on bool) {
		v := 0.0
		if on {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	flag(c.backingOff, st.BackingOff)
	flag(c.bf16, st.BF16)
	flag(c.int8, st.INT8)
	ch <- prometheus.MustNewConstMetric(c.threads, prometheus.GaugeValue, float64(st.Threads))
}
