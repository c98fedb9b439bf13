package recorder

import (
	"slices"
	"strings"
	"testing"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// startsFirst returns msgs with each selected stream start recorded just
// before the frames message holding its first frame, renumbered in order:
// the device's message and the daemon's answer reach the stream's leader
// by different paths, and the stream stores them in the order they
// arrive. A start the recording already holds before its frames stays.
func startsFirst(t *testing.T, msgs []Msg, which func(ev stream.Event) bool) []Msg {
	t.Helper()
	out := slices.Clone(msgs)
	moved := 0
	for i := 0; i < len(out); i++ {
		var ev stream.Event
		if out[i].Kind != KindEvent || stream.DecodeEvent(out[i].Data, &ev) != nil || !which(ev) {
			continue
		}
		moved++
		f := i - 1
		for f >= 0 && !holdsFrame(out[f], ev.First) {
			f--
		}
		if f < 0 {
			if !slices.ContainsFunc(out[i:], func(m Msg) bool { return holdsFrame(m, ev.First) }) {
				t.Fatalf("stream start %+v: no frames message holds its first frame", ev)
			}
			continue
		}
		m := out[i]
		copy(out[f+1:i+1], out[f:i])
		out[f] = m
	}
	if moved == 0 {
		t.Fatal("no stream start selected")
	}
	return relabel(out, 1)
}

// startsAfter returns msgs with each stream start recorded just after
// the frames message holding its first frame, where the daemon announces
// it, renumbered in order. The stream stores the device's frames and the
// daemon's answers in the order they arrive, which a loaded host can shift
// by many messages; a test that cuts a span needs the starts where it
// expects them.
func startsAfter(t *testing.T, msgs []Msg) []Msg {
	t.Helper()
	type held struct {
		m  Msg
		ev stream.Event
	}
	var starts []held
	rest := slices.DeleteFunc(slices.Clone(msgs), func(m Msg) bool {
		var ev stream.Event
		if m.Kind != KindEvent || stream.DecodeEvent(m.Data, &ev) != nil {
			return false
		}
		starts = append(starts, held{m, ev})
		return true
	})
	for _, h := range starts {
		f := slices.IndexFunc(rest, func(r Msg) bool { return holdsFrame(r, h.ev.First) })
		if f < 0 {
			t.Fatalf("stream start %+v: no frames message holds its first frame", h.ev)
		}
		rest = slices.Insert(rest, f+1, h.m)
	}
	return relabel(rest, msgs[0].Seq)
}

// holdsFrame reports whether m is a frames message holding frame seq.
func holdsFrame(m Msg, seq int64) bool {
	first, n, err := stream.PeekFrames(m.Data)
	return m.Kind == KindFrames && err == nil && first <= seq && seq < first+int64(n)
}

// TestAuditStartBeforeItsFrames: a stream start the recording holds
// before the device's frames message it answers (seed 7303: the session's
// first start, stored 3 messages before its frames) is a start: the
// replay begins at that frames message and compares the start event
// there, with a hole before it too.
func TestAuditStartBeforeItsFrames(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	record(t, nc, js, session{silence: true, streams: []int{2000, 1500}, seed: 8}, Config{Stream: "REC", Devices: []string{dev}})
	all := startsAfter(t, readAll(t, StreamSource(js, "REC", dev)))
	full, err := Audit(ctxT(t), MemorySource(all), AuditConfig{Predictor: fakepred.New(testCells)})
	if err != nil || !full.OK() || full.Events != 2 || full.Frames != 3500 {
		t.Fatalf("the recording in order: %v %+v", err, full)
	}
	// The first stream's frames are 100..2099, the second's 5000..6499.
	firstOnly := func(ev stream.Event) bool { return ev.Epoch == 1 }
	every := func(stream.Event) bool { return true }
	second := func(ev stream.Event) bool { return ev.Epoch == 2 }
	kept, _ := cutFrames(all, 1500, 1899)
	for _, tc := range []struct {
		name     string
		msgs     []Msg
		verdict  string
		holes    []Hole
		segments int
		recorded uint64
	}{
		{"the first start", startsFirst(t, all, firstOnly), "PASS", nil, 1, full.Recorded},
		{"every start", startsFirst(t, all, every), "PASS", nil, 1, full.Recorded},
		{"a start after a hole", startsFirst(t, kept, second), "INCOMPLETE", []Hole{{From: 1500, To: 1899}}, 2, 0},
		{"every start, a hole between", startsFirst(t, kept, every), "INCOMPLETE", []Hole{{From: 1500, To: 1899}}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Audit(ctxT(t), MemorySource(tc.msgs), AuditConfig{Predictor: fakepred.New(testCells)})
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.String(); !strings.HasPrefix(got, "audit "+tc.verdict) {
				t.Fatalf("verdict %q, want %s:\n%s", strings.SplitN(got, "\n", 2)[0], tc.verdict, got)
			}
			holes := make([]Hole, len(rep.Holes))
			for i, h := range rep.Holes {
				holes[i] = Hole{From: h.From, To: h.To}
			}
			if !slices.Equal(holes, tc.holes) || rep.Segments != tc.segments || rep.Events != 2 || rep.EventDiffs != 0 ||
				rep.SkippedHead != 0 || (tc.recorded > 0 && rep.Recorded != tc.recorded) {
				t.Fatalf("holes %v (want %v), %d stretches (want %d), %d events compared (want 2), %d frames messages skipped:\n%s",
					rep.Holes, tc.holes, rep.Segments, tc.segments, rep.Events, rep.SkippedHead, rep)
			}
			if tc.verdict == "PASS" && rep.Frames != full.Frames {
				t.Fatalf("%d frames replayed, want %d", rep.Frames, full.Frames)
			}
		})
	}
}
