package service

import (
	"testing"
	"time"

	"rgcpred/internal/daemon"
	"rgcpred/rgc"
	"rgcpred/stream"
)

// TestSinkTiming: each decision is reported with the arrival of its
// message, the model call that took it (daemon.Core.Call) and its
// publication: handed over during the call, the call ends at the
// hand-over; sent after it (whole calls), at the call's end. A skipped
// decision, or one taken without a call, has none (batch 0, the call's
// times at arrival).
func TestSinkTiming(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t0 := time.Now()
		k := &sink{d: &device{name: "dev7"}, at: t0}
		var got []DecisionTiming
		var calls []time.Time // the core's call start and end at each Decisions
		ts := &timingSink{k: k, f: func(dt DecisionTiming) { got = append(got, dt) }}
		core, err := daemon.New(&handingPredictor{}, ts, daemon.Config{Known: []int{1}, Cells: []int{1}, PublishSilence: true, WholeCalls: whole})
		if err != nil {
			t.Fatal(err)
		}
		k.d.core = core
		ts.seen = func() {
			_, start, end := core.Call()
			calls = append(calls, start, end)
		}
		core.Frames(&stream.Frames{FirstSeq: 0, Frames: make([]stream.Frame, rgc.WindowBins)}, 0)
		if len(got) != 2 {
			t.Fatalf("whole calls %v: %d timings, want the window ending at bin %d and a skipped decision", whole, len(got), rgc.WindowBins-1)
		}
		dt, start, end := got[0], calls[0], calls[1]
		if end.IsZero() != !whole {
			t.Fatalf("whole calls %v: the call's end %v at its decisions", whole, end)
		}
		if !whole {
			end = dt.Published // handed over during the call
		}
		if want := (DecisionTiming{Device: "dev7", Cell: 1, End: rgc.WindowBins - 1, Batch: 1, Arrived: t0, CallStart: start, CallEnd: end, Published: dt.Published}); dt != want ||
			start.Before(t0) || end.Before(start) || dt.Published.Before(end) {
			t.Fatalf("whole calls %v: %+v, want %+v, in order", whole, dt, want)
		}
		if sk := got[1]; sk.Batch != 0 || sk.CallStart != t0 || sk.CallEnd != t0 {
			t.Fatalf("whole calls %v: skipped decision %+v, want batch 0 and the call's times at arrival", whole, sk)
		}
		got = got[:0]
		k.timing(ts.f, []stream.Decision{{Cell: 1, Kind: stream.KindSpike}}, time.Now()) // after the call
		if len(got) != 1 || got[0].Batch != 0 || got[0].CallStart != t0 || got[0].CallEnd != t0 {
			t.Fatalf("whole calls %v, a decision without a call: %+v, want batch 0 and the call's times at arrival", whole, got)
		}
	}
}

// timingSink is a core's sink that times each decision through the
// service's sink k, with a skipped decision beside each part (as the
// core sends the decisions it skipped before a call with the call's), and
// calls seen first.
type timingSink struct {
	k    *sink
	f    func(DecisionTiming)
	seen func()
}

func (s *timingSink) Decisions(t int64, ds []stream.Decision) {
	s.seen()
	s.k.timing(s.f, append(ds[:len(ds):len(ds)], stream.Decision{Cell: 1, Kind: stream.KindSkipped}), time.Now())
}
func (s *timingSink) Batch(int, time.Duration) {}
func (s *timingSink) Stream(stream.Event)      {}

// handingPredictor predicts "no spike" and hands each window over
// (rgc.Progressive).
type handingPredictor struct{}

func (handingPredictor) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		row := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(row)
		row[rgc.NoSpikeClass] = 1
	}
	return nil
}

func (p handingPredictor) PredictEach(b *rgc.Batch, out []float32, done func(n int)) error {
	if err := p.Predict(b, out); err != nil {
		return err
	}
	for k := 1; k <= b.Len(); k++ {
		done(k)
	}
	return nil
}
