package service

import (
	"fmt"
	"testing"
	"time"

	"rgcpred/internal/daemon"
	"rgcpred/rgc"
	"rgcpred/stream"
)

// TestSinkTiming: each decision is reported with the arrival of its
// message, its model call and its publication; a skipped decision, or one
// after no call, has no call (batch 0, the call's times at arrival).
func TestSinkTiming(t *testing.T) {
	t0 := time.Unix(100, 0)
	k := &sink{d: &device{name: "dev7", core: timingCore(t, nil)}, at: t0, callN: 3, callStart: t0.Add(time.Millisecond), callEnd: t0.Add(2 * time.Millisecond)}
	ds := []stream.Decision{{Cell: 4, End: 900, Kind: stream.KindSpike}, {Cell: 5, End: 901, Kind: stream.KindSkipped}}
	var got []DecisionTiming
	now := t0.Add(3 * time.Millisecond)
	k.timing(func(dt DecisionTiming) { got = append(got, dt) }, ds, now)
	want := []DecisionTiming{
		{Device: "dev7", Cell: 4, End: 900, Batch: 3, Arrived: t0, CallStart: t0.Add(time.Millisecond), CallEnd: t0.Add(2 * time.Millisecond), Published: now},
		{Device: "dev7", Cell: 5, End: 901, Batch: 0, Arrived: t0, CallStart: t0, CallEnd: t0, Published: now},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("timings\n%v\nwant\n%v", got, want)
	}
	k.callN = 0 // decisions after no call
	got = got[:0]
	k.timing(func(dt DecisionTiming) { got = append(got, dt) }, ds[:1], now)
	if len(got) != 1 || got[0].Batch != 0 || got[0].CallStart != t0 || got[0].CallEnd != t0 {
		t.Fatalf("after no call: %+v, want batch 0 and the call's times at arrival", got)
	}
}

// timingCore returns a core serving cell 1 with a predictor that hands
// its windows over one at a time, calling during each (nil: no call).
func timingCore(t *testing.T, during func()) *daemon.Core {
	t.Helper()
	c, err := daemon.New(&duringPredictor{during: during}, nopSink{}, daemon.Config{Known: []int{1}, Cells: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// duringPredictor predicts "no spike" and calls during before it hands
// each window over (rgc.Progressive).
type duringPredictor struct{ during func() }

func (p *duringPredictor) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		row := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(row)
		row[rgc.NoSpikeClass] = 1
	}
	return nil
}

func (p *duringPredictor) PredictEach(b *rgc.Batch, out []float32, done func(n int)) error {
	if err := p.Predict(b, out); err != nil {
		return err
	}
	for k := 1; k <= b.Len(); k++ {
		if p.during != nil {
			p.during()
		}
		done(k)
	}
	return nil
}

type nopSink struct{}

func (nopSink) Decisions(int64, []stream.Decision) {}
func (nopSink) Batch(int, time.Duration)           {}
func (nopSink) Stream(stream.Event)                {}

// TestSinkTimingDuringCall: a decision handed over during its model call
// (rgc.Progressive) is timed with the call the core runs: its windows,
// its start, and the hand-over as its end.
func TestSinkTimingDuringCall(t *testing.T) {
	var got []DecisionTiming
	k := &sink{d: &device{name: "dev7"}, at: time.Now()}
	calls := 0
	k.d.core = timingCore(t, func() {
		calls++
		now := time.Now()
		k.timing(func(dt DecisionTiming) { got = append(got, dt) }, []stream.Decision{{Cell: 1, Kind: stream.KindSilence}}, now)
		dt := got[len(got)-1]
		n, start := k.d.core.Call()
		if dt.Batch != 1 || n != 1 || dt.CallStart != start || dt.CallStart.After(now) || dt.CallEnd != now || dt.Published != now {
			t.Fatalf("during the call: %+v (core's call %d from %v), want batch 1 from the call's start to now %v", dt, n, start, now)
		}
	})
	frames := &stream.Frames{FirstSeq: 0, Frames: make([]stream.Frame, rgc.WindowBins)}
	k.d.core.Frames(frames, 0)
	if calls != 1 {
		t.Fatalf("%d calls, want the window ending at bin %d", calls, rgc.WindowBins-1)
	}
	if n, _ := k.d.core.Call(); n != 0 {
		t.Fatalf("Call() = %d after the call, want 0", n)
	}
}
