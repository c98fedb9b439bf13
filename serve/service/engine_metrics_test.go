package service

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// statsPredictor is a predictor with fixed engine counters.
type statsPredictor struct{ st engine.Stats }

func (p *statsPredictor) Predict(*rgc.Batch, []float32) error { return nil }
func (p *statsPredictor) Stats() engine.Stats                 { return p.st }

// TestEngineMetrics: the engine's counters are exported as they are, a
// reload adds the replaced engine's counters so that the exported ones
// never go down, and a predictor without counters exports nothing.
func TestEngineMetrics(t *testing.T) {
	var cur atomic.Pointer[Model]
	c := newEngineCollector(cur.Load)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	if n, err := gatherCount(reg); err != nil || n != 0 {
		t.Fatalf("no model: %d metrics (%v), want none", n, err)
	}
	first := &statsPredictor{engine.Stats{Calls: 10, Windows: 12, SplitWindows: 8, ReusedWindows: 6, Parks: 3, Backoffs: 1, BackoffCalls: 2, Expects: 5, BackingOff: true, Threads: 2, BF16: true, INT8: true}}
	cur.Store(&Model{Predictor: first})
	second := &statsPredictor{engine.Stats{Calls: 4, Windows: 5, SplitWindows: 1, ReusedWindows: 2, Parks: 1, Expects: 7, Threads: 2}}

	type want struct {
		split, whole, reused, parks, backoffs, backoffCalls, backingOff, expects, bf16, int8 float64
	}
	check := func(stage string, w want) {
		t.Helper()
		got := map[string]float64{}
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					key += "/" + l.GetValue()
				}
				if m.Counter != nil {
					got[key] = m.Counter.GetValue()
				} else {
					got[key] = m.Gauge.GetValue()
				}
			}
		}
		exp := map[string]float64{
			"predictord_engine_windows_total/split":  w.split,
			"predictord_engine_windows_total/whole":  w.whole,
			"predictord_engine_reused_windows_total": w.reused,
			"predictord_engine_parks_total":          w.parks,
			"predictord_engine_bf16":                 w.bf16,
			"predictord_engine_int8":                 w.int8,
			"predictord_engine_backoffs_total":       w.backoffs,
			"predictord_engine_backoff_calls_total":  w.backoffCalls,
			"predictord_engine_backing_off":          w.backingOff,
			"predictord_engine_expects_total":        w.expects,
			"predictord_engine_threads":              2,
		}
		for k, v := range exp {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (exported %v), want %v", stage, k, g, ok, v)
			}
		}
	}
	check("first engine", want{split: 8, whole: 4, reused: 6, parks: 3, backoffs: 1, backoffCalls: 2, backingOff: 1, expects: 5, bf16: 1, int8: 1})
	old := c.swap(func() *Model { return cur.Swap(&Model{Predictor: second}) })
	if old == nil || old.Predictor != first {
		t.Fatalf("swap returned %v, want the first model", old)
	}
	check("after a reload", want{split: 9, whole: 8, reused: 8, parks: 4, backoffs: 1, backoffCalls: 2, backingOff: 0, expects: 12})

	cur.Store(&Model{Predictor: countingPredictorStub{}})
	if n, err := gatherCount(reg); err != nil || n != 0 {
		t.Errorf("predictor without counters: %d metrics (%v), want none", n, err)
	}
}

// countingPredictorStub is a predictor without engine counters.
type countingPredictorStub struct{}

func (countingPredictorStub) Predict(*rgc.Batch, []float32) error { return nil }

// gatherCount returns the number of metrics reg exports.
func gatherCount(reg *prometheus.Registry) (int, error) {
	fams, err := reg.Gather()
	n := 0
	for _, f := range fams {
		n += len(f.GetMetric())
	}
	return n, err
}
