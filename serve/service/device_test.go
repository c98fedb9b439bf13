package service

import (
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// TestSinkTiming: each decision is reported with the arrival of its
// message, the model call that took it (daemon.Core.Call) and its
// publication: handed over during the call, the call ends at the
// hand-over; sent after it (the last window, or whole calls), at the
// call's end. A skipped decision, or one taken without a call, has none
// (batch 0, the call's times at arrival).
func TestSinkTiming(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t0 := time.Now()
		k := &sink{d: &device{name: "dev7"}, at: t0}
		var got []DecisionTiming
		var ends []time.Time // the core's call end at each decision's Decisions
		ts := &timingSink{k: k, f: func(dt DecisionTiming) { got = append(got, dt) }}
		// Two cells due at one bin: one call of two windows, the first
		// handed over during it (unless whole), the second at its return.
		cells := []int{1, 2}
		core, err := daemon.New(&fakepred.Handing{P: noSpike{}}, ts, daemon.Config{Known: cells, Cells: cells, PublishSilence: true, WholeCalls: whole})
		if err != nil {
			t.Fatal(err)
		}
		k.d.core = core
		ts.seen = func(n int) {
			_, _, end := core.Call()
			for range n {
				ends = append(ends, end)
			}
		}
		core.Frames(&stream.Frames{FirstSeq: 0, Frames: make([]stream.Frame, rgc.WindowBins)}, 0)
		var decided []DecisionTiming
		for _, dt := range got {
			if dt.Batch != 0 {
				decided = append(decided, dt)
				continue
			}
			if dt.CallStart != t0 || dt.CallEnd != t0 {
				t.Fatalf("whole calls %v: skipped decision %+v, want the call's times at arrival", whole, dt)
			}
		}
		if len(decided) != 2 || len(ends) != 2 {
			t.Fatalf("whole calls %v: %d timings, %d of them decided, of %d decisions; want 2", whole, len(got), len(decided), len(ends))
		}
		start := decided[0].CallStart
		for i, dt := range decided {
			during := i == 0 && !whole
			end := ends[i]
			if end.IsZero() != during {
				t.Fatalf("whole calls %v, decision %d: the call's end %v at its Decisions", whole, i, end)
			}
			if during {
				end = dt.Published
			}
			want := DecisionTiming{Device: "dev7", Cell: int32(cells[i]), End: rgc.WindowBins - 1, Batch: 2, Arrived: t0, CallStart: start, CallEnd: end, Published: dt.Published}
			if dt != want || start.Before(t0) || end.Before(start) || dt.Published.Before(end) {
				t.Fatalf("whole calls %v, decision %d: %+v, want %+v, in order", whole, i, dt, want)
			}
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
// first tells seen how many decisions came.
type timingSink struct {
	k    *sink
	f    func(DecisionTiming)
	seen func(n int)
}

func (s *timingSink) Decisions(t int64, ds []stream.Decision) {
	s.seen(len(ds))
	s.k.timing(s.f, append(ds[:len(ds):len(ds)], stream.Decision{Cell: 1, Kind: stream.KindSkipped}), time.Now())
}
func (s *timingSink) Batch(int, time.Duration) {}
func (s *timingSink) Stream(stream.Event)      {}

// noSpike predicts "no spike" for every window.
type noSpike struct{}

func (noSpike) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		row := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(row)
		row[rgc.NoSpikeClass] = 1
	}
	return nil
}
