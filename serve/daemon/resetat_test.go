package daemon

import (
	"testing"

	"rgcpred/stream"
)

// TestCoreResetAt: a reset at a named frame (OpResetAt) applies before
// that frame wherever the message arrives among the frames before it, so
// cores that receive it at different points take the same decisions as a
// core reset by OpReset just before the frame. One naming another epoch,
// or arriving while no stream runs, is ignored and counted; one arriving
// after its frame applies at once and is counted; a frame that does not
// continue the stream does not trigger it; a snapshot carries it.
func TestCoreResetAt(t *testing.T) {
	const n, at, chunk = 3000, 2000, 7
	all := synthFrames(0, n)
	cells := []int{1, 2, 3}
	cfg := Config{PublishSilence: true, Stagger: true}
	ref, refSink := newCore(t, cells, cfg)
	ref.Frames(&stream.Frames{FirstSeq: 0, Frames: all.Frames[:at]}, 0)
	ref.Control(&stream.Control{Op: stream.OpReset})
	ref.Frames(&stream.Frames{FirstSeq: at, Frames: all.Frames[at:]}, 0)
	plain, plainSink := newCore(t, cells, cfg)
	plain.Frames(all, 0)

	resetAt := func(epoch uint32, seq int64) *stream.Control {
		return &stream.Control{Op: stream.OpResetAt, Epoch: epoch, At: seq}
	}
	type ctl struct {
		after int64 // sent once the message holding this frame was processed (-1: first)
		m     *stream.Control
	}
	cases := []struct {
		name        string
		ctls        []ctl
		forged      int64 // a frame far ahead sent after the controls (0: none)
		snapshot    bool  // the core is snapshotted after the controls and restored into a fresh one
		want        *collect
		resets      uint64
		stale, late uint64
		firstAfter  int64 // first seq of the second stream (0: no second stream)
	}{
		{"early", []ctl{{1100, resetAt(1, at)}}, 0, false, refSink, 1, 0, 0, at},
		{"just before its frame", []ctl{{1994, resetAt(1, at)}}, 0, false, refSink, 1, 0, 0, at},
		{"two of one epoch: the earliest applies", []ctl{{1100, resetAt(1, at+300)}, {1500, resetAt(1, at)}}, 0, false, refSink, 1, 0, 0, at},
		{"a second shard's copy after it applied", []ctl{{1100, resetAt(1, at)}, {2100, resetAt(1, at)}}, 0, false, refSink, 1, 1, 0, at},
		{"another epoch: ignored", []ctl{{1100, resetAt(7, at)}}, 0, false, plainSink, 0, 1, 0, 0},
		{"before the first frame: ignored", []ctl{{-1, resetAt(0, at)}}, 0, false, plainSink, 0, 1, 0, 0},
		{"a forged frame far ahead does not trigger it", []ctl{{1100, resetAt(1, at)}}, 1 << 40, false, refSink, 1, 0, 0, at},
		{"carried by a snapshot", []ctl{{1100, resetAt(1, at)}}, 0, true, refSink, 1, 0, 0, at},
		{"late: applied at once", []ctl{{2100, resetAt(1, at)}}, 0, false, nil, 1, 0, 1, 2100/chunk*chunk + chunk},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			core, sink := newCore(t, cells, cfg)
			send := func(after int64) {
				for _, k := range c.ctls {
					if k.after == after {
						core.Control(k.m)
						if c.forged != 0 {
							core.Frames(synthFrames(c.forged, 1), 0)
						}
						if c.snapshot {
							s := core.Snapshot()
							next, nextSink := newCore(t, cells, cfg)
							if err := next.Restore(s); err != nil {
								t.Fatal(err)
							}
							nextSink.got, nextSink.events = sink.got, sink.events
							core, sink = next, nextSink
						}
					}
				}
			}
			send(-1)
			for lo := int64(0); lo < n; lo += chunk {
				hi := min(lo+chunk, n)
				core.Frames(&stream.Frames{FirstSeq: lo, Frames: all.Frames[lo:hi]}, 0)
				for s := lo; s < hi; s++ {
					send(s)
				}
			}
			st := core.Stats()
			if st.Resets != c.resets || st.ResetsStale != c.stale || st.ResetsLate != c.late {
				t.Fatalf("resets %d, stale %d, late %d; want %d, %d, %d", st.Resets, st.ResetsStale, st.ResetsLate, c.resets, c.stale, c.late)
			}
			if _, ok := core.PendingReset(); ok {
				t.Fatal("a reset still pending after its frame")
			}
			if c.firstAfter != 0 {
				if len(sink.events) != 2 || sink.events[1].First != c.firstAfter || sink.events[1].Reason != stream.EventReset {
					t.Fatalf("events %+v, want a reset's stream from %d", sink.events, c.firstAfter)
				}
			} else if len(sink.events) != 1 {
				t.Fatalf("events %+v, want only the first stream", sink.events)
			}
			if c.want == nil {
				return
			}
			if len(sink.events) != len(c.want.events) || !sameDecisions(sink.got, c.want.got) {
				t.Fatalf("%d decisions, %d events; want the reference's %d and %d, equal", len(sink.got), len(sink.events),
					len(c.want.got), len(c.want.events))
			}
			for i := range sink.events {
				if sink.events[i] != c.want.events[i] {
					t.Fatalf("event %d %+v, want %+v", i, sink.events[i], c.want.events[i])
				}
			}
		})
	}
}
