package recorder

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// framesAt returns the index of the first frames message of msgs whose
// first frame is at or after seq (len(msgs) when none).
func framesAt(msgs []Msg, seq int64) int {
	for i, m := range msgs {
		if m.Kind == KindFrames {
			if first, _, err := stream.PeekFrames(m.Data); err == nil && first >= seq {
				return i
			}
		}
	}
	return len(msgs)
}

// cutFrames removes every message from the frames message starting at
// from up to the one starting after to, as a stream without a leader
// stores nothing of what passes; it returns what stays and what went.
func cutFrames(msgs []Msg, from, to int64) (kept, gone []Msg) {
	i, j := framesAt(msgs, from), framesAt(msgs, to+1)
	return slices.Concat(msgs[:i], msgs[j:]), slices.Clone(msgs[i:j])
}

// fillsOf returns gone as a Filler stores them again: on the fill subject
// after the recorded message after, ordered as in a log, with sequence
// numbers from seq on.
func fillsOf(gone []Msg, after, seq uint64) []Msg {
	var out []Msg
	live := int64(-1)
	for n, m := range gone {
		o := fillOrder{frame: live, rank: 1, n: uint64(n)}
		if m.Kind == KindFrames {
			first, k, _ := stream.PeekFrames(m.Data)
			o.frame, o.rank, live = first, 0, first+int64(k)-1
		}
		h := nats.Header{}
		for k, v := range m.Header {
			h[k] = v
		}
		h.Set(FillSubjectHeader, m.Subject)
		h.Set(FillAfterHeader, strconv.FormatUint(after, 10))
		h.Set(FillOrderHeader, fmt.Sprintf("%d.%d.%d", o.frame, o.rank, o.n))
		h.Set(FillTimeHeader, strconv.FormatInt(m.Time.UnixNano(), 10))
		out = append(out, Msg{Seq: seq + uint64(n), Time: m.Time, Data: m.Data, Subject: FillSubject(dev), Header: h})
	}
	return out
}

// rebatch returns msgs with each run of frames messages packed again,
// per frames to a message (as a resend answer packs them), the other
// messages after the frames they followed.
func rebatch(t *testing.T, msgs []Msg, per int) []Msg {
	t.Helper()
	var out []Msg
	var run []stream.Frame
	var first int64
	var at Msg
	flush := func() {
		for len(run) > 0 {
			n := min(per, len(run))
			b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: first, Frames: run[:n]})
			if err != nil {
				t.Fatal(err)
			}
			m := at
			m.Data = b
			out = append(out, m)
			run, first = run[n:], first+int64(n)
		}
	}
	for _, m := range msgs {
		if m.Kind != KindFrames {
			flush()
			out = append(out, m)
			continue
		}
		var f stream.Frames
		if err := stream.DecodeFrames(m.Data, &f); err != nil {
			t.Fatal(err)
		}
		if len(run) == 0 {
			first, at = f.FirstSeq, m
		}
		run = append(run, f.Frames...)
	}
	flush()
	return out
}

// relabel returns msgs with sequence numbers from seq on: stored later.
func relabel(msgs []Msg, seq uint64) []Msg {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Seq = seq + uint64(i)
	}
	return out
}

// alterFirstDecision changes the kind of the first decision recorded
// that which selects.
func alterFirstDecision(t *testing.T, msgs []Msg, which func(d stream.Decision) bool) []Msg {
	t.Helper()
	out := slices.Clone(msgs)
	for i, m := range out {
		var ds stream.Decisions
		if m.Kind != KindDecisions || stream.DecodeDecisions(m.Data, &ds) != nil || !which(ds.Decisions[0]) {
			continue
		}
		if ds.Decisions[0].Kind == stream.KindSpike {
			ds.Decisions[0].Kind, ds.Decisions[0].Bin = stream.KindSilence, ds.Decisions[0].End+80
		} else {
			ds.Decisions[0].Kind, ds.Decisions[0].Bin = stream.KindSpike, ds.Decisions[0].End+1
		}
		b, err := stream.AppendDecisions(nil, &ds)
		if err != nil {
			t.Fatal(err)
		}
		out[i].Data = b
		return out
	}
	t.Fatal("no decision to alter")
	return nil
}

// TestAuditHoles: recorded sessions with spans the stream did not store,
// filled (wholly, twice, in part) or not: the audit passes a filled one,
// reports what stays a hole (its frames, INCOMPLETE, not a mismatch),
// judges the decisions before it and from the next stream start on, and
// still fails on a difference where it judges.
func TestAuditHoles(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	record(t, nc, js, session{silence: true, streams: []int{4000, 1500}, seed: 7}, Config{Stream: "REC", Devices: []string{dev}})
	all := startsAfter(t, readAll(t, StreamSource(js, "REC", dev)))
	last := all[len(all)-1].Seq
	// The first stream's frames are 100..4099, the second's 5000..6499,
	// 8 to a message.
	kept, gone := cutFrames(all, 2100, 2899)
	after := kept[framesAt(all, 2100)-1].Seq
	fills := fillsOf(gone, after, last+1)
	half := slices.IndexFunc(gone, func(m Msg) bool {
		first, _, err := stream.PeekFrames(m.Data)
		return m.Kind == KindFrames && err == nil && first == 2500
	})
	late, lateGone := cutFrames(all, 5400, 5799)
	rebatched := rebatch(t, gone, 13)
	again := rebatch(t, all[framesAt(all, 1000):framesAt(all, 1500)], 13)
	framesMsgs := func(msgs []Msg) int {
		return len(slices.DeleteFunc(slices.Clone(msgs), func(m Msg) bool { return m.Kind != KindFrames }))
	}
	goneFrames := 0 // of a message filled and recorded too, a frames message's fill stays, another's recorded copy
	for _, m := range gone {
		if m.Kind == KindFrames {
			goneFrames++
		}
	}
	full, err := Audit(ctxT(t), MemorySource(all), AuditConfig{Predictor: fakepred.New(testCells)})
	if err != nil || !full.OK() {
		t.Fatalf("the whole recording: %v %+v", err, full)
	}
	hole := func(from, to int64) []Hole { return []Hole{{From: from, To: to, Seq: all[framesAt(all, to+1)].Seq}} }
	for _, tc := range []struct {
		name     string
		msgs     []Msg
		verdict  string
		holes    []Hole
		segments int
		filled   int
		check    func(r *Report) bool
	}{
		{"complete", all, "PASS", nil, 1, 0, func(r *Report) bool { return r.Recorded == full.Recorded && r.Unjudged == 0 }},
		{"a hole", kept, "INCOMPLETE", hole(2100, 2899), 2, 0, func(r *Report) bool {
			return r.Unjudged > 0 && r.Recorded < full.Recorded && r.Matched+r.Unjudged == r.Recorded
		}},
		{"a hole filled", slices.Concat(kept, fills), "PASS", nil, 1, len(gone), func(r *Report) bool {
			return r.Recorded == full.Recorded && r.Matched == full.Matched && r.Events == full.Events
		}},
		{"filled twice", slices.Concat(kept, fills, fillsOf(gone, after, last+1+uint64(len(gone)))), "PASS", nil, 1, len(gone),
			func(r *Report) bool { return r.Recorded == full.Recorded }},
		{"filled, then stored late", slices.Concat(kept, fills, relabel(gone, last+1+uint64(len(gone)))), "PASS", nil, 1, goneFrames,
			func(r *Report) bool { return r.Recorded == full.Recorded && r.Refusals() == 0 }},
		{"filled in other batches, then stored late", slices.Concat(kept, fillsOf(rebatched, after, last+1), relabel(gone, last+1+uint64(len(rebatched)))),
			"PASS", nil, 1, framesMsgs(rebatched), func(r *Report) bool { return r.Recorded == full.Recorded && r.Refusals() == 0 }},
		{"recorded frames filled again in other batches", slices.Concat(all, fillsOf(again, all[framesAt(all, 1000)-1].Seq, last+1)),
			"PASS", nil, 1, framesMsgs(again), func(r *Report) bool { return r.Recorded == full.Recorded && r.Refusals() == 0 }},
		{"filled in part", slices.Concat(kept, fills[:half]), "INCOMPLETE", hole(2500, 2899), 2, half, func(r *Report) bool {
			return r.Unjudged > 0 && r.InHole+r.Matched >= r.Replayed
		}},
		{"a hole in the last stream", late, "INCOMPLETE", hole(5400, 5799), 1, 0, func(r *Report) bool {
			return r.Unjudged > 0 && len(lateGone) > 0 && r.Events == full.Events
		}},
		{"a difference before a hole", alterFirstDecision(t, kept, func(d stream.Decision) bool { return d.End < 2100 }), "FAIL",
			hole(2100, 2899), 2, 0, func(r *Report) bool { return r.Differ == 1 }},
		{"a difference in the next stream", alterFirstDecision(t, kept, func(d stream.Decision) bool { return d.Epoch == 2 }), "FAIL",
			hole(2100, 2899), 2, 0, func(r *Report) bool { return r.Differ == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Audit(ctxT(t), Merge(MemorySource(tc.msgs), dev), AuditConfig{Predictor: fakepred.New(testCells)})
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.String(); !strings.HasPrefix(got, "audit "+tc.verdict) {
				t.Fatalf("verdict %q, want %s:\n%s", strings.SplitN(got, "\n", 2)[0], tc.verdict, got)
			}
			if !slices.Equal(rep.Holes, tc.holes) || rep.Segments != tc.segments || rep.Filled != uint64(tc.filled) || !tc.check(rep) {
				t.Fatalf("holes %v (want %v), %d stretches (want %d), %d filled (want %d):\n%s", rep.Holes, tc.holes, rep.Segments, tc.segments,
					rep.Filled, tc.filled, rep)
			}
			if tc.verdict == "INCOMPLETE" && (rep.OK() || !rep.Judged() || rep.Missing+rep.Extra+rep.Differ+rep.EventDiffs != 0) {
				t.Fatalf("an incomplete recording judged as a mismatch or a pass:\n%s", rep)
			}
		})
	}
}

// setSubjects makes the recording stream REC capture the device's
// subjects (on), or only its session header and fill subjects.
func setSubjects(t *testing.T, js jetstream.JetStream, on bool) {
	t.Helper()
	cfg := jetstream.StreamConfig{Name: "REC", Subjects: Subjects(dev), Storage: jetstream.FileStorage}
	if !on {
		cfg.Subjects = []string{SessionSubject(dev), FillSubject(dev)}
	}
	if _, err := js.UpdateStream(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
}

// TestFiller: a filler stores again what the recording lacks of its log
// (frames, a decisions message, and frames it got from a resend answer,
// placed by their frames), and nothing else; it does nothing while not
// active, nor as a standby for what is younger than StandbySettle, and a second filler over the same log (a standby taking over)
// finds nothing more to fill; a second hole, after the filler was
// inactive, is filled in its place too. The reader yields one complete
// session, the resent frames naming the answer's subject.
func TestFiller(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	ctx := ctxT(t)
	if _, err := Ensure(ctx, js, Config{Stream: "REC", Devices: []string{dev}}); err != nil {
		t.Fatal(err)
	}
	log := NewLog(0)
	obs, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	if _, err := obs.Subscribe("rgc."+dev+".>", func(m *nats.Msg) { log.Add(m, m.Subject) }); err != nil {
		t.Fatal(err)
	}
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	framesMsg := func(i int) []byte {
		b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: int64(8 * i), Frames: make([]stream.Frame, 8)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const lost = 25 // a frames message only the resend answer brings
	for i := range 30 {
		switch i {
		case 10, 20:
			storedAndLogged(t, nc, js, log, 10, i+i/20) // the decisions at 15 logged, not stored
			setSubjects(t, js, i == 20)
		case 15:
			if err := nc.Publish(stream.SpikesSubject(dev), []byte("decisions in the hole")); err != nil {
				t.Fatal(err)
			}
		}
		if i != lost {
			if err := nc.Publish(stream.StimSubject(dev), framesMsg(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	storedAndLogged(t, nc, js, log, 19, 30) // frames 25 lost
	log.AddResent(&nats.Msg{Subject: "_INBOX.answer", Data: framesMsg(lost)}, stream.StimSubject(dev))
	active := false
	f := NewFiller(js, FillConfig{Stream: "REC", Device: dev, Log: log, Active: func() bool { return active }, Settle: time.Nanosecond})
	if err := f.Round(ctx); err != nil || f.Stats().Filled != 0 {
		t.Fatalf("inactive round: %v, %+v", err, f.Stats())
	}
	standby := NewFiller(js, FillConfig{Stream: "REC", Device: dev, Log: log, Holder: func() bool { return false },
		Settle: time.Nanosecond, StandbySettle: time.Hour})
	if err := standby.Round(ctx); err != nil || standby.Stats().Filled != 0 {
		t.Fatalf("a standby filled what is younger than its settle: %v, %+v", err, standby.Stats())
	}
	active = true
	for range 2 {
		if err := f.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.Stats(); st.Filled != 12 || st.Lost != 0 {
		t.Fatalf("filled %+v, want the 10 frames messages and the decisions of the hole and the resent frames", st)
	}
	g := NewFiller(js, FillConfig{Stream: "REC", Device: dev, Log: log, Settle: time.Nanosecond})
	if err := g.Round(ctx); err != nil || g.Stats().Filled != 0 {
		t.Fatalf("a second filler over the same log: %v, %+v", err, g.Stats())
	}
	// A second hole, filled after the filler was inactive a while (a
	// holder that lost and took the lease again reads back the fills of
	// the first): each fill still goes to its own place.
	setSubjects(t, js, false)
	for i := 30; i < 50; i++ {
		if i == 40 {
			storedAndLogged(t, nc, js, log, 31, 41) // the 12 fills stored, the resent frames logged
			setSubjects(t, js, true)
		}
		if err := nc.Publish(stream.StimSubject(dev), framesMsg(i)); err != nil {
			t.Fatal(err)
		}
	}
	storedAndLogged(t, nc, js, log, 41, 51)
	active = false
	if err := f.Round(ctx); err != nil {
		t.Fatal(err)
	}
	active = true
	if err := f.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Filled != 22 {
		t.Fatalf("filled %+v, want 10 more frames messages", st)
	}
	var firsts []int64
	var decisions int
	for _, m := range readAll(t, StreamSource(js, "REC", dev)) {
		switch m.Kind {
		case KindFrames:
			first, _, err := stream.PeekFrames(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			firsts = append(firsts, first)
			answer := ""
			if first == 8*lost {
				answer = "_INBOX.answer"
			}
			if m.Answer != answer {
				t.Fatalf("frames %d: answer subject %q, want %q", first, m.Answer, answer)
			}
		case KindDecisions:
			if len(firsts) < 15 || string(m.Data) != "decisions in the hole" {
				t.Fatalf("decisions %q after %d frames messages, want it after 15", m.Data, len(firsts))
			}
			decisions++
		}
	}
	want := make([]int64, 50)
	for i := range want {
		want[i] = int64(8 * i)
	}
	if !slices.Equal(firsts, want) || decisions != 1 {
		t.Fatalf("read frames %v and %d decisions messages, want %v and 1", firsts, decisions, want)
	}
}

// TestLogAddAllocates: logging a received message (the processor's hot
// path) allocates nothing, and the log keeps the last messages only,
// counting those that left it before they were checked.
func TestLogAddAllocates(t *testing.T) {
	l := NewLog(4)
	b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: 7, Frames: make([]stream.Frame, 2)})
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: stream.StimSubject(dev), Data: b}
	subj := m.Subject
	if n := testing.AllocsPerRun(100, func() { l.Add(m, subj) }); n != 0 {
		t.Fatalf("Log.Add allocates %v per message", n)
	}
	ents, next, lost := l.since(nil, 0, 1<<62)
	if len(ents) != 4 || next != l.n || lost != l.n-4 || ents[3].order.frame != 7 || ents[3].order.rank != 0 {
		t.Fatalf("kept %d entries up to %d, %d lost (of %d added), last order %+v", len(ents), next, lost, l.n, ents[3].order)
	}
}

// TestLinesHoles: the frames numbering the audit follows: a message ahead
// of its turn, a stale copy and a message injected far ahead leave no
// hole; frames that stop and go on further (two messages and 16 frames
// at least) do.
func TestLinesHoles(t *testing.T) {
	type msg struct{ first, last int64 }
	for _, tc := range []struct {
		name string
		msgs []msg
		gaps []Hole
	}{
		{"in order", []msg{{0, 7}, {8, 15}, {16, 23}}, nil},
		{"one ahead of its turn", []msg{{0, 7}, {16, 23}, {8, 15}, {24, 31}, {32, 39}, {40, 47}}, nil},
		{"a stale copy", []msg{{0, 7}, {8, 15}, {0, 7}, {16, 23}}, nil},
		{"injected far ahead", []msg{{0, 7}, {1000, 1015}, {8, 15}, {16, 23}}, nil},
		{"a hole", []msg{{0, 7}, {40, 47}, {48, 55}, {56, 63}}, []Hole{{From: 8, To: 39, Seq: 2}}},
		{"a jump back", []msg{{0, 7}, {8, 15}, {0, 7}, {8, 15}, {16, 23}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lines
			for i, m := range tc.msgs {
				l.frames(place{seq: uint64(i + 1)}, m.first, m.last)
			}
			var got []Hole
			for _, g := range l.gaps {
				got = append(got, g.Hole)
			}
			if !slices.Equal(got, tc.gaps) {
				t.Fatalf("gaps %v, want %v", got, tc.gaps)
			}
		})
	}
}

// TestMergeFramesOverlap: the reader passes each frame once when fills
// and recorded messages batch the same frames otherwise: a message wholly
// passed on is left out, one passed on at its head is cut.
func TestMergeFramesOverlap(t *testing.T) {
	frames := func(seq uint64, first, last int64) Msg {
		b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: first, Frames: make([]stream.Frame, last-first+1)})
		if err != nil {
			t.Fatal(err)
		}
		return Msg{Kind: KindFrames, Seq: seq, Subject: stream.StimSubject(dev), Data: b, Time: time.Unix(1, 0)}
	}
	rec := []Msg{frames(1, 0, 7), frames(2, 8, 15)}
	for _, tc := range []struct {
		name  string
		msgs  []Msg
		spans [][2]int64
	}{
		{"a fill at a recorded message's head cuts it", append(slices.Clone(rec), fillsOf([]Msg{frames(0, 8, 11)}, 1, 10)...),
			[][2]int64{{0, 7}, {8, 11}, {12, 15}}},
		{"a fill of frames passed on is left out", append(slices.Clone(rec), fillsOf([]Msg{frames(0, 4, 11)}, 2, 10)...),
			[][2]int64{{0, 7}, {8, 15}}},
		{"a fill passed on at its head is cut", append(slices.Clone(rec), fillsOf([]Msg{frames(0, 12, 19)}, 2, 10)...),
			[][2]int64{{0, 7}, {8, 15}, {16, 19}}},
		{"a recorded message a fill carries wholly is left out", append(slices.Clone(rec), fillsOf([]Msg{frames(0, 8, 15)}, 1, 10)...),
			[][2]int64{{0, 7}, {8, 15}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spans [][2]int64
			for _, m := range readAll(t, Merge(MemorySource(tc.msgs), dev)) {
				first, n, err := stream.PeekFrames(m.Data)
				if err != nil {
					t.Fatal(err)
				}
				spans = append(spans, [2]int64{first, first + int64(n) - 1})
			}
			if !slices.Equal(spans, tc.spans) {
				t.Fatalf("frames read %v, want %v", spans, tc.spans)
			}
		})
	}
}
