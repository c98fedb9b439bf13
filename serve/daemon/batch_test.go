package daemon

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// advancing is a predictor during whose calls 100 frames arrive.
type advancing struct {
	p       rgc.Predictor
	backlog *int64
	calls   int
}

func (a *advancing) Predict(b *rgc.Batch, out []float32) error {
	a.calls++
	*a.backlog += 100
	return a.p.Predict(b, out)
}

type failing struct {
	err   error
	panic bool
	nan   bool
	zero  bool    // an all-zero output
	scale float32 // a valid distribution times scale (if not 0)
}

func (f *failing) Predict(b *rgc.Batch, out []float32) error {
	if f.panic {
		panic("boom")
	}
	out = out[:b.Len()*rgc.NumClasses]
	switch {
	case f.nan:
		for i := range out {
			out[i] = float32(math.NaN())
		}
	case f.zero:
		clear(out)
	case f.scale != 0:
		for i := range out {
			out[i] = f.scale / rgc.NumClasses
		}
	}
	return f.err
}

func TestCorePredictorFailures(t *testing.T) {
	for _, f := range []*failing{{err: errors.New("gpu on fire")}, {panic: true}, {nan: true}, {zero: true}, {scale: 2}} {
		sink := &collect{}
		core, err := New(f, sink, Config{Known: []int{1, 2}, Cells: []int{1, 2}, PublishSilence: true})
		if err != nil {
			t.Fatal(err)
		}
		core.Frames(synthFrames(0, 1200), 0)
		st := core.Stats()
		if st.PredictErrors != 6 || len(sink.got) != 6 || core.LastError() == nil {
			t.Fatalf("%+v: stats %+v, %d decisions, want 6 errors (2 cells at 1023, 1103, 1183)", f, st, len(sink.got))
		}
		for _, d := range sink.got {
			if d.Kind != stream.KindSkipped || d.Flags != stream.FlagModelError {
				t.Fatalf("%+v: decision %+v, want a skipped decision flagged as a model error", f, d)
			}
		}
		if n, _ := core.Next(1); n != 1023+3*rgc.Horizon {
			t.Fatalf("next %d after failures", n)
		}
	}
}

// endsRecorder records the window ends of every model call.
type endsRecorder struct {
	p    rgc.Predictor
	ends [][]int
}

func (r *endsRecorder) Predict(b *rgc.Batch, out []float32) error {
	r.ends = append(r.ends, slices.Clone(b.Ends))
	return r.p.Predict(b, out)
}

// TestCoreReplica: a replica core refuses gathering and skipping, sends
// whole calls, and with frames waiting still calls the model on windows
// of one bin.
func TestCoreReplica(t *testing.T) {
	cells := []int{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"plain", Config{Replica: true}, false},
		{"gather 1", Config{Replica: true, Gather: 1}, false},
		{"gathering", Config{Replica: true, Gather: 8}, true},
		{"skipping", Config{Replica: true, MaxLag: 100}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Known, c.cfg.Cells, c.cfg.PublishSilence, c.cfg.Stagger = cells, cells, true, true
			rec := &endsRecorder{p: fakepred.New(cells)}
			core, err := New(rec, &countSink{}, c.cfg)
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), "replica") {
					t.Fatalf("New: %v, want a replica's refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !core.Config().WholeCalls {
				t.Fatal("a replica without whole calls")
			}
			core.Frames(synthFrames(0, 1024+200), 5) // frames wait: a gathering core would gather
			if len(rec.ends) == 0 {
				t.Fatal("no model call")
			}
			for _, ends := range rec.ends {
				for _, e := range ends {
					if e != ends[0] {
						t.Fatalf("a replica's call with windows ending at %v, want one bin per call", ends)
					}
				}
			}
		})
	}
}

// expectRecorder is a predictor that records the calls announced to it
// (rgc.Expecter) and the calls made.
type expectRecorder struct {
	constPred
	expects []int // windows announced, one entry per Expect
	within  []time.Duration
	calls   []int // windows per Predict call
}

func (r *expectRecorder) Expect(n int, d time.Duration) {
	r.expects = append(r.expects, n)
	r.within = append(r.within, d)
}

func (r *expectRecorder) Predict(b *rgc.Batch, out []float32) error {
	r.calls = append(r.calls, b.Len())
	return r.constPred.Predict(b, out)
}

// TestCoreExpectsNextCall: after each frames message, a predictor that can
// prepare (rgc.Expecter) hears how many windows fall due at the next bin,
// exactly when some do, and the next frame's call has that many windows.
func TestCoreExpectsNextCall(t *testing.T) {
	cells := make([]int, 64)
	for i := range cells {
		cells[i] = i
	}
	for _, chunk := range []int{1, 3} {
		t.Run(fmt.Sprintf("frames per message %d", chunk), func(t *testing.T) {
			r := &expectRecorder{}
			core, err := New(r, &countSink{}, Config{Known: cells, Cells: cells, All: cells, Stagger: true})
			if err != nil {
				t.Fatal(err)
			}
			core.Frames(synthFrames(0, 1000), 0)
			if len(r.expects) != 0 {
				t.Fatalf("%d announcements during the first history, want none", len(r.expects))
			}
			announced, prevDue := 0, 0
			for seq := int64(1000); seq < 1700; seq += int64(chunk) {
				r.expects, r.within, r.calls = r.expects[:0], r.within[:0], r.calls[:0]
				core.Frames(synthFrames(seq, chunk), 0)
				if chunk == 1 && prevDue > 0 && !slices.Equal(r.calls, []int{prevDue}) {
					t.Fatalf("bin %d: calls %v, want one of the %d windows announced", seq, r.calls, prevDue)
				}
				// The windows due at the bin after this message's last.
				next := seq + int64(chunk)
				due := 0
				for i := range core.cells {
					if int64(core.cells[i].Next) == next {
						due++
					}
				}
				want := []int(nil)
				if due > 0 {
					want = []int{due}
					announced++
				}
				if !slices.Equal(r.expects, want) {
					t.Fatalf("after bins %d..%d: announced %v, want %v", seq, next-1, r.expects, want)
				}
				for _, d := range r.within {
					if d < binsDuration(1) || d > binsDuration(3) {
						t.Fatalf("announced within %v, want one to three bins", d)
					}
				}
				prevDue = due
			}
			if min := 700 / chunk / 2; announced < min {
				t.Fatalf("%d announcements over 700 bins, want at least %d (64 cells, a window every 40 bins)", announced, min)
			}
		})
	}
}

// partSink records decisions with whether each came during its model call
// (Core.Call: the call every decision was taken by, ending before or at
// it) and the order of parts and batch reports.
type partSink struct {
	collect
	core   *Core
	during []bool   // per decision
	log    []string // "d<n>" per Decisions during a call, "D<n>" after, "b<n>" per Batch
}

func (s *partSink) Decisions(t int64, ds []stream.Decision) {
	n, start, end := s.core.Call()
	if n == 0 || start.IsZero() || time.Since(start) < 0 || !end.IsZero() && end.Before(start) {
		panic(fmt.Sprintf("decisions of a call of %d windows from %v to %v", n, start, end))
	}
	during := end.IsZero()
	tag := "D"
	if during {
		tag = "d"
	}
	for range ds {
		s.during = append(s.during, during)
	}
	s.log = append(s.log, fmt.Sprintf("%s%d", tag, len(ds)))
	s.collect.Decisions(t, ds)
}

func (s *partSink) Batch(n int, d time.Duration) {
	s.log = append(s.log, fmt.Sprintf("b%d", n))
	s.collect.Batch(n, d)
}

// TestCoreHandsOver: with a predictor that hands windows over as it
// computes them (rgc.Progressive), each part's decisions go to the sink
// during the call, before its Batch report, and the decisions are those
// of whole calls (Config.WholeCalls), in the same order. A failure after
// some windows were handed over skips only the rest.
func TestCoreHandsOver(t *testing.T) {
	cells := []int{1, 2, 3, 4, 5, 6, 7}
	run := func(p rgc.Predictor, whole bool) *partSink {
		t.Helper()
		s := &partSink{}
		core, err := New(p, s, Config{Known: cells, Cells: cells, PublishSilence: true, WholeCalls: whole})
		if err != nil {
			t.Fatal(err)
		}
		s.core = core
		core.Frames(synthFrames(0, 1200), 0)
		return s
	}
	// "No spike" every time: every call has all 7 windows.
	quiet := classPred(rgc.NoSpikeClass)
	want := run(quiet, false)
	if len(want.got) != 3*len(cells) || !slices.Equal(want.log, []string{"b7", "D7", "b7", "D7", "b7", "D7"}) {
		t.Fatalf("plain predictor: %d decisions, parts %v; want 3 calls of 7 windows, each sent whole after its call", len(want.got), want.log)
	}
	cases := []struct {
		name  string
		step  int
		whole bool
		log   []string
	}{
		// Handing leaves the last window to its return.
		{"one at a time", 1, false, []string{"d1", "d1", "d1", "d1", "d1", "d1", "b7", "D1"}},
		{"three at a time", 3, false, []string{"d3", "d3", "b7", "D1"}},
		{"whole calls", 1, true, []string{"b7", "D7"}},
	}
	for _, tc := range cases {
		got := run(&fakepred.Handing{P: quiet, Step: tc.step}, tc.whole)
		if !slices.Equal(got.got, want.got) {
			t.Fatalf("%s: decisions differ from whole calls'", tc.name)
		}
		log := slices.Concat(tc.log, tc.log, tc.log)
		if !slices.Equal(got.log, log) {
			t.Fatalf("%s: parts %v, want %v", tc.name, got.log, log)
		}
		during := 0
		for _, d := range got.during {
			if d {
				during++
			}
		}
		if wantDuring := map[bool]int{false: 18, true: 0}[tc.whole]; during != wantDuring {
			t.Fatalf("%s: %d decisions sent during their call (Core.Call), want %d", tc.name, during, wantDuring)
		}
	}

	// Failing after 2 windows: those are decided, the other 5 skipped.
	s := run(&fakepred.Handing{P: quiet, Step: 1, FailAt: 2, Err: errors.New("device lost")}, false)
	if len(s.got) != 3*len(cells) {
		t.Fatalf("%d decisions, want %d", len(s.got), 3*len(cells))
	}
	for i, d := range s.got {
		skipped := d.Kind == stream.KindSkipped && d.Flags == stream.FlagModelError
		if wantSkip := i%len(cells) >= 2; skipped != wantSkip {
			t.Fatalf("decision %d %+v: skipped %v, want %v", i, d, skipped, wantSkip)
		}
		if !skipped && d != want.got[i] {
			t.Fatalf("decision %d %+v handed over before the failure, want %+v", i, d, want.got[i])
		}
	}
	if st := s.core.Stats(); st.PredictErrors != 15 || st.Predictions != 6 {
		t.Fatalf("stats %+v, want 15 errors and 6 predictions", st)
	}
}
