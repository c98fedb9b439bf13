package daemon

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// shipped is the shipped recording, loaded once for this package's tests.
var shipped = testrec.Loader{Dir: "../../data/chicken-17-08-21"}

// smallRecording is the first bins bins of the shipped recording.
func smallRecording(t testing.TB, bins int) *rgc.Recording {
	return shipped.Prefix(t, bins)
}

// collect is a Sink that records every decision.
type collect struct {
	got     []stream.Decision
	batches []int
	events  []stream.Event
}

func (c *collect) Decisions(t int64, ds []stream.Decision) {
	for _, d := range ds {
		if d.End > t || d.End < t-MaxGatherBins {
			panic(fmt.Sprintf("decision of the window ending at %d sent at frame %d", d.End, t))
		}
	}
	c.got = append(c.got, ds...)
}
func (c *collect) Batch(n int, _ time.Duration) { c.batches = append(c.batches, n) }
func (c *collect) Stream(ev stream.Event)       { c.events = append(c.events, ev) }

func (c *collect) spikes(cell int) []int64 {
	var out []int64
	for _, d := range c.got {
		if int(d.Cell) == cell && d.Kind == stream.KindSpike {
			out = append(out, d.Bin)
		}
	}
	return out
}

// frames returns the recording's bins [from, to) as frames messages of
// chunk frames each.
func frames(rec *rgc.Recording, from, to, chunk int) []*stream.Frames {
	var out []*stream.Frames
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		f := &stream.Frames{FirstSeq: int64(lo), Frames: make([]stream.Frame, hi-lo)}
		for b := lo; b < hi; b++ {
			fr := &f.Frames[b-lo]
			fr.Time = int64(b) * 1_008_264
			for c := range fr.LED {
				fr.LED[c] = rec.Stimulus[c][b]
			}
		}
		out = append(out, f)
	}
	return out
}

// recordedHistory is the recorded spike row of the window ending at t.
func recordedHistory(cell *rgc.Cell, t int) stream.History {
	h := stream.History{Cell: int32(cell.ClusterID)}
	lo := t - (rgc.WindowBins - 1)
	for _, b := range cell.SpikeBins {
		if int(b) >= lo && int(b) <= t {
			h.Spikes[int(b)-lo] = true
		}
	}
	return h
}

// TestCoreEqualsOfflineRollout: for the same stimulus, predictor and
// recorded histories the core emits exactly rollout.Run's spikes, with the
// simultaneous start and with staggered starts (rollout.Options.Stagger vs
// Config.Stagger: one rule, rollout.StartOffset), for every spike policy
// (median, sample, threshold), whatever the chunking of frames and the
// batch limit.
func TestCoreEqualsOfflineRollout(t *testing.T) {
	rec := smallRecording(t, 60000)
	idx := rec.QualityCells()[:6]
	ids := make([]int, len(idx))
	for i, c := range idx {
		ids[i] = rec.Cells[c].ClusterID
	}
	lo, hi := rec.SplitRange(rgc.Test)
	th := &rollout.Threshold{Thresholds: map[int]float64{}, Source: "test"}
	for i, id := range ids {
		th.Thresholds[id] = 0.1 + 0.15*float64(i)
	}
	policies := []rollout.Policy{rollout.Median{}, rollout.Sample{Seed: 7}, th}
	for pi, stagger := range []bool{false, true, true, false} {
		policy := policies[min(pi, len(policies)-1)]
		off, err := rollout.Run(context.Background(), rec, fakepred.New(ids),
			rollout.Options{Split: rgc.Test, Cells: idx, Stagger: stagger, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name                    string
			chunk, maxBatch, gather int
			backlog                 int64 // frames said to wait after each message
		}{
			{"chunk 1, one batch", 1, 0, 0, 0}, {"chunk 37, batch 4", 37, 4, 0, 0}, {"chunk 1024, batch 1", 1024, 1, 0, 0},
			// Frames waiting in the message: windows of several bins per call.
			{"chunk 37, gather 2", 37, 0, 2, 0}, {"chunk 1024, batch 4, gather 6", 1024, 4, 6, 0},
			// A backlog: windows gathered across messages until Flush.
			{"chunk 1, backlog, gather 3", 1, 0, 3, 5},
		} {
			t.Run(fmt.Sprintf("stagger %v, policy %v, %s", stagger, policy, tc.name), func(t *testing.T) {
				sink := &collect{}
				core, err := New(fakepred.New(ids), sink, Config{Known: ids, Cells: ids, MaxBatch: tc.maxBatch, MaxLag: 0,
					Stagger: stagger, PublishSilence: true, Policy: policy, Gather: tc.gather})
				if err != nil {
					t.Fatal(err)
				}
				var ctl stream.Control
				ctl.Op = stream.OpHistory
				for i, c := range idx {
					// The spike row of the cell's own first window.
					ctl.Histories = append(ctl.Histories, recordedHistory(&rec.Cells[c], off.Trains[i].Start))
				}
				core.Control(&ctl)
				for _, f := range frames(rec, lo, hi, tc.chunk) {
					core.Frames(f, tc.backlog)
				}
				core.Flush() // the service's queue ran empty
				total := 0
				for i, tr := range off.Trains {
					wantStart := off.From - 1
					if stagger {
						wantStart += rollout.StartOffset(i, len(ids)) // ids ascend
					}
					if o, _ := core.StartOffset(ids[i]); tr.Start != wantStart || o != tr.Start-(off.From-1) {
						t.Fatalf("cell %d: offline start %d, core offset %d, want start %d", ids[i], tr.Start, o, wantStart)
					}
					// The generated spikes after the cell's first window end
					// (before it the train holds the recorded history).
					var want []int64
					for j, v := range tr.Generated {
						if v == 1 && off.From+j > tr.Start {
							want = append(want, int64(off.From+j))
						}
					}
					var got []int64
					firstEnd := int64(-1)
					for _, d := range sink.got {
						if int(d.Cell) == ids[i] && firstEnd < 0 {
							firstEnd = d.End
						}
					}
					if firstEnd != int64(tr.Start) {
						t.Fatalf("cell %d: first decision at window end %d, want %d", ids[i], firstEnd, tr.Start)
					}
					for _, b := range sink.spikes(ids[i]) {
						if b < int64(off.To) {
							got = append(got, b)
						}
					}
					if len(want) < 10 {
						t.Fatalf("cell %d: only %d offline spikes, test too weak", ids[i], len(want))
					}
					if !equal(got, want) {
						t.Fatalf("cell %d: daemon spikes differ from offline rollout:\n got %v\nwant %v", ids[i], got, want)
					}
					total += len(want)
				}
				st := core.Stats()
				if st.Stale+st.GapBins+st.Clamped+st.DeadlineMisses+st.PredictErrors != 0 || st.Histories != uint64(len(ids)) {
					t.Fatalf("unexpected stats %+v", st)
				}
				largest := 0
				for _, n := range sink.batches {
					if tc.maxBatch > 0 && n > tc.maxBatch {
						t.Fatalf("batch of %d > max %d", n, tc.maxBatch)
					}
					largest = max(largest, n)
				}
				// Staggered starts put at most one of the 6 cells at a bin,
				// so a larger call gathered windows of several bins.
				if stagger && tc.gather > 1 && largest < 2 {
					t.Errorf("gather %d: largest call %d windows, want windows of several bins per call", tc.gather, largest)
				}
				t.Logf("%d spikes over %d cells, %d predictions", total, len(ids), st.Predictions)
			})
		}
	}
}

// TestCoreStaggerSpreadsLoad: with a model that always says "no spike",
// simultaneous starts put every cell in one call every 80 frames; staggered
// starts over the whole (pre-shard) list give each frame at most
// ceil(n/80) windows, and a shard's cells keep their offsets in the whole
// list.
func TestCoreStaggerSpreadsLoad(t *testing.T) {
	all := make([]int, 60)
	for i := range all {
		all[i] = 100 + 3*i
	}
	var shard []int // shard 1 of 2
	for i := 1; i < len(all); i += 2 {
		shard = append(shard, all[i])
	}
	for _, tc := range []struct {
		name     string
		cells    []int
		stagger  bool
		maxBatch int
	}{
		{"simultaneous", all, false, len(all)},
		{"staggered", all, true, 1},
		{"staggered shard 1/2", shard, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &collect{}
			core, err := New(classPred(rgc.NoSpikeClass), sink,
				Config{Known: all, Cells: tc.cells, All: all, Stagger: tc.stagger, PublishSilence: true})
			if err != nil {
				t.Fatal(err)
			}
			core.Frames(synthFrames(0, 1823), 0) // bins 0..1822: 10 windows per cell
			maxB := 0
			for _, n := range sink.batches {
				maxB = max(maxB, n)
			}
			if maxB != tc.maxBatch || len(sink.got) != 10*len(tc.cells) {
				t.Fatalf("largest call %d windows (want %d), %d decisions (want %d)", maxB, tc.maxBatch, len(sink.got), 10*len(tc.cells))
			}
			for _, id := range tc.cells {
				i := slices.Index(all, id)
				o, _ := core.StartOffset(id)
				want := 0
				if tc.stagger {
					want = rollout.StartOffset(i, len(all))
				}
				if o != want {
					t.Fatalf("cell %d (index %d of %d): offset %d, want %d", id, i, len(all), o, want)
				}
			}
		})
	}
	if _, err := New(classPred(0), &collect{}, Config{Known: all, Cells: []int{100}, All: []int{103, 100}, Stagger: true}); err == nil {
		t.Error("unsorted whole list accepted")
	}
	if _, err := New(classPred(0), &collect{}, Config{Known: all, Cells: []int{100}, All: []int{103}, Stagger: true}); err == nil {
		t.Error("served cell missing from the whole list accepted")
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// synthFrames makes n frames from seq first with a deterministic pattern.
func synthFrames(first int64, n int) *stream.Frames {
	f := &stream.Frames{FirstSeq: first, Frames: make([]stream.Frame, n)}
	for i := range f.Frames {
		s := first + int64(i)
		for c := range f.Frames[i].LED {
			f.Frames[i].LED[c] = float32((s*int64(c+3))%7) / 7
		}
		f.Frames[i].Time = s
	}
	return f
}

func newCore(t testing.TB, cells []int, cfg Config) (*Core, *collect) {
	t.Helper()
	sink := &collect{}
	if cfg.Known == nil {
		cfg.Known = cells
	}
	cfg.Cells = cells
	c, err := New(fakepred.New(cfg.Known), sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, sink
}

func TestCoreFirstWindowAndStepping(t *testing.T) {
	core, sink := newCore(t, []int{5, 9}, Config{PublishSilence: true})
	core.Frames(synthFrames(100, 1023), 0)
	if len(sink.got) != 0 || sink.batches != nil {
		t.Fatalf("decisions before a whole window: %+v", sink.got)
	}
	core.Frames(synthFrames(1123, 1), 0)
	if len(sink.got) != 2 || len(sink.batches) != 1 || sink.batches[0] != 2 {
		t.Fatalf("first window (end 1123): %d decisions in batches %v, want 2 in one batch", len(sink.got), sink.batches)
	}
	// Every decision follows rollout.Step from its window end, and the next
	// decision of a cell is at the bin the previous one stepped to.
	core.Frames(synthFrames(1124, 3000), 0)
	next := map[int32]int64{5: 1123, 9: 1123}
	for _, d := range sink.got {
		if d.End != next[d.Cell] {
			t.Fatalf("cell %d decided at %d, want %d", d.Cell, d.End, next[d.Cell])
		}
		if d.Kind == stream.KindSpike && (d.Bin <= d.End || d.Bin > d.End+rgc.Horizon) ||
			d.Kind == stream.KindSilence && d.Bin != d.End+rgc.Horizon {
			t.Fatalf("bad decision %+v", d)
		}
		if d.Prob != fakepred.Peak || d.FrameTime != d.End {
			t.Fatalf("decision %+v: prob or frame time", d)
		}
		next[d.Cell] = d.Bin
	}
	for cell, n := range next {
		got, _ := core.Next(int(cell))
		if got != n {
			t.Fatalf("cell %d next %d, want %d", cell, got, n)
		}
	}
}

// TestCorePollFor: PollFor answers pollBins while the next frame brings a
// due window, and 0 otherwise, as frames advance.
func TestCorePollFor(t *testing.T) {
	core, _ := newCore(t, []int{5, 9}, Config{Stagger: true})
	if d := core.PollFor(); d != 0 {
		t.Fatalf("PollFor %v before the first frame, want 0", d)
	}
	seq, polled, parked := int64(100), 0, 0
	core.Frames(synthFrames(seq, 1000), 0) // most of the first windows' history
	seq += 1000
	for range 400 {
		n := 1 + int(seq%5)
		core.Frames(synthFrames(seq, n), 0)
		seq += int64(n)
		due := int64(math.MaxInt64)
		for _, cell := range []int{5, 9} {
			next, _ := core.Next(cell)
			due = min(due, next)
		}
		in := due - core.LastSeq()
		want := time.Duration(0)
		if in <= 1 {
			want = binsDuration(pollBins)
			polled++
		} else {
			parked++
		}
		if got := core.PollFor(); got != want {
			t.Fatalf("after frame %d, next window %d bins on: PollFor %v, want %v", seq-1, in, got, want)
		}
	}
	if polled == 0 || parked == 0 {
		t.Errorf("%d polls and %d parks over 400 messages: want both", polled, parked)
	}
}

// TestCoreZeroAllocs proves the per-frame path allocates nothing, also when
// every cell is due at once.
func TestCoreZeroAllocs(t *testing.T) {
	cells := []int{1, 2, 3, 4, 5, 6, 7, 8}
	sink := &countSink{}
	core, err := New(fakepred.New(cells), sink, Config{Known: cells, Cells: cells, MaxBatch: 3, PublishSilence: true})
	if err != nil {
		t.Fatal(err)
	}
	core.Frames(synthFrames(0, 1024), 0)
	one := synthFrames(1024, 1)
	allocs := testing.AllocsPerRun(3000, func() {
		core.Frames(one, 0)
		one.FirstSeq++
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per frame, want 0", allocs)
	}
	if sink.n < 100 {
		t.Fatalf("only %d decisions in 3000 frames: the measured path did not predict", sink.n)
	}
	// All cells due at one frame: right after a reset, the first window.
	core.Control(&stream.Control{Op: stream.OpReset})
	seq := int64(1 << 20)
	allocs = testing.AllocsPerRun(5, func() {
		core.Control(&stream.Control{Op: stream.OpReset})
		for range 1024 {
			one.FirstSeq = seq
			core.Frames(one, 0)
			seq++
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per window of frames with all cells due, want 0", allocs)
	}
	// Gathering windows across bins while frames wait (and catching up the
	// windows that came due meanwhile) allocates nothing either.
	gsink := &countSink{}
	gathering, err := New(fakepred.New(cells), gsink,
		Config{Known: cells, Cells: cells, MaxBatch: 3, PublishSilence: true, Gather: 2, Stagger: true})
	if err != nil {
		t.Fatal(err)
	}
	gathering.Frames(synthFrames(0, 1024), 0)
	four := synthFrames(1024, 4)
	allocs = testing.AllocsPerRun(1000, func() {
		gathering.Frames(four, 3)
		four.FirstSeq += 4
	})
	gathering.Flush()
	if allocs != 0 || gsink.n < 100 {
		t.Fatalf("gathering: %v allocs per message, %d decisions, want 0 and at least 100", allocs, gsink.n)
	}
}

type countSink struct{ n, batches int }

func (c *countSink) Decisions(_ int64, ds []stream.Decision) { c.n += len(ds) }
func (c *countSink) Batch(int, time.Duration)                { c.batches++ }
func (c *countSink) Stream(stream.Event)                     {}

// reference runs a fresh core on clean frames first..last.
func reference(t *testing.T, f *stream.Frames) []stream.Decision {
	core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
	core.Frames(f, 0)
	return sink.got
}

func TestCoreRobustness(t *testing.T) {
	clean := synthFrames(0, 4000)
	want := reference(t, clean)
	sub := func(lo, hi int) *stream.Frames {
		return &stream.Frames{FirstSeq: int64(lo), Frames: clean.Frames[lo:hi]}
	}
	t.Run("duplicates and out-of-order frames are dropped", func(t *testing.T) {
		core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
		core.Frames(sub(0, 2000), 0)
		core.Frames(sub(1500, 1900), 0) // duplicates
		core.Frames(sub(1999, 2000), 0) // duplicate of the last
		core.Frames(sub(2000, 4000), 0)
		if !sameDecisions(sink.got, want) {
			t.Fatal("decisions changed by duplicates")
		}
		if st := core.Stats(); st.Stale != 401 || st.Frames != 4000 {
			t.Fatalf("stats %+v, want 401 stale, 4000 frames", st)
		}
	})
	t.Run("gaps are filled by holding the last frame", func(t *testing.T) {
		held := synthFrames(0, 4000)
		for b := 2001; b < 2011; b++ {
			held.Frames[b] = held.Frames[2000]
		}
		wantHeld := reference(t, held)
		core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
		core.Frames(sub(0, 2001), 0)
		core.Frames(sub(2011, 4000), 0)
		if !sameDecisions(sink.got, wantHeld) {
			t.Fatal("gap-filled run differs from a run on held frames")
		}
		if st := core.Stats(); st.GapBins != 10 {
			t.Fatalf("gap bins %d, want 10", st.GapBins)
		}
	})
	t.Run("a gap longer than a window restarts the stream", func(t *testing.T) {
		core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
		core.Frames(sub(0, 1500), 0)
		n := len(sink.got)
		core.Frames(synthFrames(5000, 1023), 0)
		if len(sink.got) != n {
			t.Fatal("decisions before the restarted stream has a whole window")
		}
		core.Frames(synthFrames(6023, 1), 0)
		if st := core.Stats(); st.Restarts != 1 || st.GapBins != 0 || len(sink.got) != n+3 {
			t.Fatalf("stats %+v, %d new decisions, want a restart and 3 decisions at 6023", st, len(sink.got)-n)
		}
	})
	t.Run("a jump back by a window or more restarts the stream", func(t *testing.T) {
		core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
		core.Frames(sub(3000, 4000), 0)
		core.Frames(clean, 0) // device restarted at seq 0, no reset
		st := core.Stats()
		if st.Restarts != 1 || st.Stale != 0 || !sameDecisions(sink.got, want) {
			t.Fatalf("stats %+v: want one restart and the fresh stream's decisions", st)
		}
	})
	t.Run("out-of-range intensities are clamped", func(t *testing.T) {
		core, _ := newCore(t, []int{1}, Config{})
		f := synthFrames(0, 3)
		f.Frames[1].LED = [4]float32{-5, 3, 1e30, 0.5}
		core.Frames(f, 0)
		if got := core.stim; got[0][1] != stream.MinIntensity || got[1][1] != stream.MaxIntensity ||
			got[2][1] != stream.MaxIntensity || got[3][1] != 0.5 {
			t.Fatalf("ring after clamping: %v %v %v %v", got[0][1], got[1][1], got[2][1], got[3][1])
		}
		if st := core.Stats(); st.Clamped != 1 {
			t.Fatalf("clamped %d, want 1", st.Clamped)
		}
	})
	t.Run("reset starts over with histories", func(t *testing.T) {
		core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
		core.Frames(sub(0, 3000), 0)
		core.Control(&stream.Control{Op: stream.OpReset})
		core.Frames(clean, 0)
		if !sameDecisions(sink.got[len(sink.got)-len(want):], want) || core.Stats().Resets != 1 {
			t.Fatal("after a reset the core does not behave like a fresh one")
		}
	})
	t.Run("histories: unknown, other shard, late", func(t *testing.T) {
		core, _ := newCore(t, []int{1, 2}, Config{Known: []int{1, 2, 3}})
		h := stream.Control{Op: stream.OpHistory, Histories: []stream.History{{Cell: 1}, {Cell: 3}, {Cell: 77}}}
		core.Control(&h)
		core.Frames(sub(0, 1000), 0)
		core.Control(&stream.Control{Op: stream.OpHistory, Histories: []stream.History{{Cell: 2}}}) // before the first window: applied
		core.Frames(sub(1000, 1100), 0)
		core.Control(&stream.Control{Op: stream.OpHistory, Histories: []stream.History{{Cell: 2}}}) // late
		st := core.Stats()
		if st.Histories != 2 || st.UnknownCell != 1 || st.HistoryLate != 1 {
			t.Fatalf("stats %+v: want 2 histories, 1 unknown (77), 1 late; cell 3 is another shard's", st)
		}
	})
	t.Run("history changes the first window", func(t *testing.T) {
		h := stream.History{Cell: 2}
		for j := 0; j < rgc.WindowBins; j += 3 {
			h.Spikes[j] = true
		}
		var first [2][]stream.Decision
		for i, ctl := range []*stream.Control{nil, {Op: stream.OpHistory, Histories: []stream.History{h}}} {
			core, sink := newCore(t, []int{2}, Config{PublishSilence: true})
			if ctl != nil {
				core.Control(ctl)
			}
			core.Frames(sub(0, 1024), 0)
			first[i] = sink.got
		}
		win := make([]float32, rgc.WindowLen)
		for c := range rgc.StimChannels {
			for j := range rgc.WindowBins {
				win[c*rgc.WindowBins+j] = clean.Frames[j].LED[c]
			}
		}
		for j, s := range h.Spikes {
			if s {
				win[rgc.SpikeRow*rgc.WindowBins+j] = 1
			}
		}
		k := fakepred.Class(win, 2)
		next, _ := rollout.Step(1023, k)
		if len(first[1]) != 1 || first[1][0].Bin != int64(next) {
			t.Fatalf("with history: %+v, want bin %d (class %d)", first[1], next, k)
		}
	})
}

func sameDecisions(a, b []stream.Decision) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Cell != y.Cell || x.Kind != y.Kind || x.End != y.End || x.Bin != y.Bin || x.Prob != y.Prob {
			return false
		}
	}
	return true
}

func TestCoreOverloadSkipsStaleDeadlines(t *testing.T) {
	core, sink := newCore(t, []int{1, 2, 3}, Config{MaxLag: 40, PublishSilence: true})
	core.Frames(synthFrames(0, 1023), 0)
	// 100 frames are queued behind the first window's end: the decisions
	// due at 1023 are stale.
	core.Frames(synthFrames(1023, 1), 100) // 100 frames queued behind it
	st := core.Stats()
	if st.DeadlineMisses != 3 || st.Predictions != 0 || len(sink.got) != 3 {
		t.Fatalf("stats %+v, %d decisions: want 3 misses, no predictions", st, len(sink.got))
	}
	for _, d := range sink.got {
		if d.Kind != stream.KindSkipped || d.Flags != 0 || d.End != 1023 || d.Bin != 1023+rgc.Horizon || d.Epoch != 1 {
			t.Fatalf("skipped decision %+v, want kind %d through %d, epoch 1", d, stream.KindSkipped, 1023+rgc.Horizon)
		}
	}
	for _, c := range []int{1, 2, 3} {
		if n, _ := core.Next(c); n != 1023+rgc.Horizon {
			t.Fatalf("cell %d next %d, want %d (stepped as no spike)", c, n, 1023+rgc.Horizon)
		}
	}
	// Caught up (lag within 40): decisions are computed again.
	core.Frames(synthFrames(1024, 80), 40)
	if st := core.Stats(); st.Predictions != 3 || st.DeadlineMisses != 3 {
		t.Fatalf("after catching up: %+v", st)
	}
}

// TestCoreOverloadBetweenCalls: frames that arrive while the model runs
// make the later calls of the same frame stale.
func TestCoreOverloadBetweenCalls(t *testing.T) {
	var backlog int64
	p := &advancing{p: fakepred.New([]int{1, 2, 3}), backlog: &backlog}
	sink := &collect{}
	core, err := New(p, sink, Config{Known: []int{1, 2, 3}, Cells: []int{1, 2, 3}, MaxBatch: 1, MaxLag: 40,
		Backlog: func() int64 { return backlog }})
	if err != nil {
		t.Fatal(err)
	}
	core.Frames(synthFrames(0, 1024), 0)
	// The first call (cell 1) ran; meanwhile 100 frames arrived, so cells
	// 2 and 3 were skipped.
	if st := core.Stats(); st.Predictions != 1 || st.DeadlineMisses != 2 || p.calls != 1 {
		t.Fatalf("stats %+v, %d calls: want 1 prediction and 2 misses", st, p.calls)
	}
}

func TestNewRejects(t *testing.T) {
	p := fakepred.New([]int{1})
	s := &collect{}
	for _, cfg := range []Config{
		{Known: []int{1}},
		{Known: []int{1}, Cells: []int{2}},
		{Known: []int{1}, Cells: []int{1, 1}},
		{Known: []int{1}, Cells: []int{1}, MaxLag: -1},
	} {
		if _, err := New(p, s, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// classPred puts all mass on its class.
type classPred int

func (k classPred) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		row := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(row)
		row[k] = 1
	}
	return nil
}

// constPred puts all mass on class 39: every cell predicts a spike every
// 40 bins, so 64 cells make 1.6 windows per frame.
type constPred struct{}

func (constPred) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		row := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(row)
		row[39] = 1
	}
	return nil
}

// BenchmarkCoreFrame measures the core's own per-frame cost for 64 cells
// (ring write, due scan, window assembly, stepping, decisions) with a
// predictor that costs nothing; BenchmarkWindowCopy is the baseline: copying
// one window, the least work a due cell needs.
func BenchmarkCoreFrame(b *testing.B) {
	cells := make([]int, 64)
	for i := range cells {
		cells[i] = i
	}
	core, err := New(constPred{}, &countSink{}, Config{Known: cells, Cells: cells})
	if err != nil {
		b.Fatal(err)
	}
	core.Frames(synthFrames(0, 1024), 0)
	one := synthFrames(1024, 1)
	b.ReportAllocs()
	for b.Loop() {
		core.Frames(one, 0)
		one.FirstSeq++
	}
	b.ReportMetric(float64(core.Stats().Predictions)/float64(core.Stats().Frames), "windows/frame")
}

func BenchmarkWindowCopy(b *testing.B) {
	src := make([]float32, rgc.WindowLen)
	dst := make([]float32, rgc.WindowLen)
	for b.Loop() {
		copy(dst, src)
	}
}
