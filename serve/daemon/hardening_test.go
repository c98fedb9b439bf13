package daemon

import (
	"context"
	"encoding/binary"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// since returns the decisions of epoch e.
func since(ds []stream.Decision, e uint16) []stream.Decision {
	var out []stream.Decision
	for _, d := range ds {
		if d.Epoch == e {
			out = append(out, d)
		}
	}
	return out
}

// one returns frame seq of f as a message of its own.
func one(f *stream.Frames, seq int64) *stream.Frames {
	return &stream.Frames{FirstSeq: seq, Frames: f.Frames[seq-f.FirstSeq : seq-f.FirstSeq+1]}
}

// TestCoreForeignFramesLoseNothing: frames that do not continue the stream
// (a forged frame far ahead or behind, a short burst of another numbering)
// are dropped and counted; the stream's decisions are those of a clean run
// and the overload policy (default --max-lag 40) never fires.
func TestCoreForeignFramesLoseNothing(t *testing.T) {
	clean := synthFrames(0, 4000)
	want := reference(t, clean)
	for _, tc := range []struct {
		name    string
		foreign *stream.Frames
	}{
		{"one frame at the largest seq", synthFrames(stream.MaxSeq, 1)},
		{"one frame 2^53-1 (the issue's poisoned frame, finite)", synthFrames(stream.MaxSeq-1, 1)},
		{"one frame far behind", synthFrames(0, 1)},
		{"a burst shorter than the confirmation", synthFrames(1<<40, DefaultConfirmFrames-1)},
		{"one frame just past a window's gap", synthFrames(2000+rgc.WindowBins+1, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true, MaxLag: 40})
			for s := int64(0); s < 4000; s++ {
				core.Frames(one(clean, s), 0)
				if s == 1999 {
					core.Frames(tc.foreign, 0)
				}
			}
			st := core.Stats()
			if !sameDecisions(sink.got, want) {
				t.Fatalf("decisions changed by a foreign frame (stats %+v)", st)
			}
			if st.OutOfStream != uint64(len(tc.foreign.Frames)) || st.Restarts != 0 || st.DeadlineMisses != 0 || len(sink.events) != 1 {
				t.Fatalf("stats %+v, %d events: want %d out-of-stream frames, no restart, no miss", st, len(sink.events), len(tc.foreign.Frames))
			}
		})
	}
}

// TestCoreRenumberedStreamRestarts: a device that restarts its numbering
// without a reset gets a new epoch after DefaultConfirmFrames frames, an
// event saying so, and the decisions of a fresh stream, with no decision
// skipped under the default --max-lag.
func TestCoreRenumberedStreamRestarts(t *testing.T) {
	clean := synthFrames(0, 4000)
	want := reference(t, clean)
	for _, tc := range []struct {
		name  string
		old   *stream.Frames
		chunk int64
	}{
		{"jump back, one frame a message", synthFrames(5000, 3000), 1},
		{"jump forward, 7 frames a message", synthFrames(100, 1000), 7},
		{"jump forward, a window's history in one message, then one frame a message", synthFrames(100, 1000), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true, MaxLag: 40})
			core.Frames(tc.old, 0)
			misses := core.Stats().DeadlineMisses // the old stream came in one message
			if tc.old.FirstSeq < 5000 {
				clean = synthFrames(1_000_000, 4000) // far ahead of the old stream
				want = reference(t, clean)
			}
			for lo := int64(0); lo < 4000; {
				hi := min(lo+max(tc.chunk, 1), 4000)
				if tc.chunk == 0 && lo == 0 {
					hi = rgc.WindowBins - 1
				}
				core.Frames(&stream.Frames{FirstSeq: clean.FirstSeq + lo, Frames: clean.Frames[lo:hi]}, 0)
				lo = hi
			}
			st := core.Stats()
			if st.Restarts != 1 || st.DeadlineMisses != misses || st.OutOfStream != 0 || st.Frames != uint64(len(tc.old.Frames))+4000 {
				t.Fatalf("stats %+v: want 1 restart, no miss, every frame accepted", st)
			}
			ev := sink.events
			if len(ev) != 2 || ev[0] != (stream.Event{Reason: stream.EventFirst, Epoch: 1, First: tc.old.FirstSeq, PrevLast: -1}) ||
				ev[1] != (stream.Event{Reason: stream.EventRestart, Epoch: 2, First: clean.FirstSeq, PrevLast: tc.old.LastSeq()}) {
				t.Fatalf("events %+v", ev)
			}
			got := since(sink.got, 2)
			wantE := make([]stream.Decision, len(want))
			for i, d := range want {
				d.Epoch = 2
				wantE[i] = d
			}
			if !sameDecisions(got, wantE) || core.Epoch() != 2 || core.First() != clean.FirstSeq {
				t.Fatalf("the renumbered stream's decisions differ from a fresh run's (%d vs %d)", len(got), len(want))
			}
		})
	}
}

// TestCoreTwoPublishers: a second publisher with another numbering,
// interleaved frame by frame, never takes the device from the stream that
// holds it; when the first stops, the second takes over.
func TestCoreTwoPublishers(t *testing.T) {
	a := synthFrames(0, 3000)
	want := reference(t, a)
	b := synthFrames(500_000, 3000+2*DefaultConfirmFrames)
	core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true, MaxLag: 40})
	for i := range int64(3000) {
		core.Frames(one(a, i), 0)
		core.Frames(one(b, b.FirstSeq+i), 0)
	}
	st := core.Stats()
	if !sameDecisions(sink.got, want) || st.Restarts != 0 || st.OutOfStream != 2999 {
		t.Fatalf("stats %+v: the first stream's decisions changed or the second's frames were not rejected", st)
	}
	for i := int64(3000); i < int64(len(b.Frames)); i++ {
		core.Frames(one(b, b.FirstSeq+i), 0)
	}
	// B's frame 2999 came after A's last one: the candidate starts there.
	if st := core.Stats(); st.Restarts != 1 || core.First() != b.FirstSeq+2999 || len(sink.events) != 2 {
		t.Fatalf("stats %+v, first %d: want the second publisher's stream after the first stopped", st, core.First())
	}
}

// TestCoreFilledDecisionsFlagged: decisions whose window holds gap-filled
// bins carry FlagFilled, the others do not.
func TestCoreFilledDecisionsFlagged(t *testing.T) {
	clean := synthFrames(0, 5000)
	core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true})
	core.Frames(&stream.Frames{FirstSeq: 0, Frames: clean.Frames[:2001]}, 0)
	core.Frames(&stream.Frames{FirstSeq: 2011, Frames: clean.Frames[2011:]}, 0)
	var flagged uint64
	for _, d := range sink.got {
		in := d.End >= 2001 && d.End-rgc.WindowBins < 2010 // the window holds bins 2001..2010
		if (d.Flags&stream.FlagFilled != 0) != in {
			t.Fatalf("decision %+v: filled flag %v, want %v", d, d.Flags&stream.FlagFilled != 0, in)
		}
		if in {
			flagged++
		}
	}
	if st := core.Stats(); flagged == 0 || st.FilledDecisions != flagged {
		t.Fatalf("%d flagged decisions, stats %+v", flagged, st)
	}
}

// TestCoreGapWorkBounded: frames a window apart make the core fill every
// bin between them, but it only runs the model for bins within --max-lag
// of the frame it received; older due windows go out as skipped.
func TestCoreGapWorkBounded(t *testing.T) {
	cells := []int{1, 2, 3, 4, 5, 6}
	p := fakepred.New(cells)
	sink := &collect{}
	core, err := New(p, sink, Config{Known: cells, Cells: cells, MaxLag: 40, PublishSilence: true})
	if err != nil {
		t.Fatal(err)
	}
	f := synthFrames(0, 1)
	const msgs = 50
	for i := range int64(msgs) {
		f.FirstSeq = i * rgc.WindowBins
		core.Frames(f, 0)
	}
	st := core.Stats()
	// Each prediction moves a cell at least one bin, and only the last 41
	// bins before each received frame are predicted.
	if limit := msgs * len(cells) * 41; p.Windows > limit || st.Restarts != 0 {
		t.Fatalf("%d windows predicted for %d messages (limit %d), stats %+v", p.Windows, msgs, limit, st)
	}
	if st.DeadlineMisses == 0 || st.FilledDecisions == 0 {
		t.Fatalf("stats %+v: want skipped and flagged decisions for the filled bins", st)
	}
}

// TestCoreEpochs: every stream start is an event with a new epoch, and
// decisions carry it.
func TestCoreEpochs(t *testing.T) {
	core, sink := newCore(t, []int{1}, Config{PublishSilence: true})
	core.Frames(synthFrames(10, 1100), 0)
	n := len(sink.got)
	core.Control(&stream.Control{Op: stream.OpReset})
	if core.First() != -1 || core.Epoch() != 1 {
		t.Fatalf("after reset: first %d epoch %d", core.First(), core.Epoch())
	}
	core.Frames(synthFrames(0, 1100), 0)
	want := []stream.Event{{Reason: stream.EventFirst, Epoch: 1, First: 10, PrevLast: -1}, {Reason: stream.EventReset, Epoch: 2, First: 0, PrevLast: 1109}}
	if len(sink.events) != 2 || sink.events[0] != want[0] || sink.events[1] != want[1] {
		t.Fatalf("events %+v, want %+v", sink.events, want)
	}
	if n == 0 || len(sink.got) == n {
		t.Fatalf("%d decisions before the reset, %d after: want some in both streams", n, len(sink.got)-n)
	}
	for i, d := range sink.got {
		if want := uint16(1 + min(i/n, 1)); d.Epoch != want {
			t.Fatalf("decision %d %+v: epoch %d, want %d", i, d, d.Epoch, want)
		}
	}
}

// FuzzCoreRecovers feeds the core an arbitrary sequence of frames
// messages, histories, resets and resets at a frame, then a reset and a clean stream with its
// recorded histories: the decisions after the reset must equal the offline
// rollout's (rollout.Run), under the default --max-lag.
func FuzzCoreRecovers(f *testing.F) {
	rec := smallRecording(f, 30000)
	idx := rec.QualityCells()[:3]
	ids := make([]int, len(idx))
	for i, c := range idx {
		ids[i] = rec.Cells[c].ClusterID
	}
	lo, hi := rec.SplitRange(rgc.Test)
	off, err := rollout.Run(context.Background(), rec, fakepred.New(ids), rollout.Options{Split: rgc.Test, Cells: idx, Stagger: true})
	if err != nil {
		f.Fatal(err)
	}
	clean := frames(rec, lo, hi, 1)
	var hist stream.Control
	hist.Op = stream.OpHistory
	for i, c := range idx {
		hist.Histories = append(hist.Histories, recordedHistory(&rec.Cells[c], off.Trains[i].Start))
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 255, 255, 255, 255, 255, 255, 31, 0, 3, 1, 2, 0, 100, 0, 0, 0, 0, 0, 0, 9})
	f.Add([]byte{3, 0, 1, 2, 0, 0, 4, 0, 0, 0, 0, 0, 0, 40})
	f.Fuzz(func(t *testing.T, ops []byte) {
		sink := &collect{}
		core, err := New(fakepred.New(ids), sink, Config{Known: append([]int{424242}, ids...), Cells: ids, Stagger: true, MaxLag: 40, PublishSilence: true})
		if err != nil {
			t.Fatal(err)
		}
		var fr stream.Frames
		for len(ops) >= 10 && len(fr.Frames) < 1<<16 {
			op, arg := ops[0], ops[1:10]
			ops = ops[10:]
			switch op % 4 {
			case 0, 1: // frames: first seq, count, intensity pattern
				first := int64(binary.LittleEndian.Uint64(arg[:8]) % (stream.MaxSeq + 1))
				if op%4 == 1 {
					first = max(core.LastSeq()+int64(int8(arg[0])), 0)
				}
				n := int64(arg[8]%64) + 1
				first = min(first, stream.MaxSeq-n+1)
				fr.FirstSeq, fr.Frames = first, make([]stream.Frame, n)
				for i := range fr.Frames {
					for c := range fr.Frames[i].LED {
						fr.Frames[i].LED[c] = float32(int8(arg[(i+c)%8])) / 16
					}
				}
				core.Frames(&fr, 0)
			case 2: // a reset, or one at a frame near the last (of this epoch or the one before)
				if arg[0]&1 == 0 {
					core.Control(&stream.Control{Op: stream.OpReset})
					break
				}
				at := max(core.LastSeq()+int64(int8(arg[1])), 0)
				core.Control(&stream.Control{Op: stream.OpResetAt, Epoch: core.Epoch() - uint32(arg[2]&1), At: at})
			case 3:
				h := stream.History{Cell: int32([]int{ids[0], ids[1], 424242, 7}[arg[0]%4])}
				for j := range h.Spikes {
					h.Spikes[j] = arg[j%9]>>(j%8)&1 == 1
				}
				core.Control(&stream.Control{Op: stream.OpHistory, Histories: []stream.History{h}})
			}
		}
		core.Control(&stream.Control{Op: stream.OpReset})
		core.Control(&hist)
		n := len(sink.got)
		epoch := core.Epoch() + 1
		for _, m := range clean {
			core.Frames(m, 0)
		}
		if core.Epoch() != epoch {
			t.Fatalf("epoch %d after the clean stream, want %d", core.Epoch(), epoch)
		}
		after := sink.got[n:]
		for _, d := range after {
			if d.Kind == stream.KindSkipped || d.Epoch != uint16(epoch) || d.Flags != 0 {
				t.Fatalf("decision %+v after the reset: want no skip, no flag, epoch %d", d, epoch)
			}
		}
		for i, tr := range off.Trains {
			var want, got []int64
			for j, v := range tr.Generated {
				if v == 1 && off.From+j > tr.Start {
					want = append(want, int64(off.From+j))
				}
			}
			for _, d := range after {
				if int(d.Cell) == ids[i] && d.Kind == stream.KindSpike && d.Bin < int64(off.To) {
					got = append(got, d.Bin)
				}
			}
			if !equal(got, want) {
				t.Fatalf("cell %d: after the reset the spikes differ from the offline rollout:\n got %v\nwant %v", ids[i], got, want)
			}
		}
	})
}
