package daemon

import (
	"testing"
	"time"

	"rgcpred/stream"
)

// answer is a device's answer to a request of a long gap: frames
// [from, to) of the stream for the request [first, first+count); from ==
// to answers with no frame.
type answer struct{ first, count, from, to int64 }

// requests returns the requests a gap [lo, hi) takes, in order.
func requests(lo, hi int64) [][2]int64 {
	var rs [][2]int64
	for s := lo; s < hi; s += stream.MaxResendFrames {
		rs = append(rs, [2]int64{s, min(stream.MaxResendFrames, hi-s)})
	}
	return rs
}

// answers returns the answers of every request of [lo, hi) with its own
// frames, except those of the requests listed in empty (answered with no
// frame).
func answers(lo, hi int64, empty ...int) []answer {
	var as []answer
	for i, r := range requests(lo, hi) {
		a := answer{first: r[0], count: r[1], from: r[0], to: r[0] + r[1]}
		for _, e := range empty {
			if e == i {
				a.to = a.from
			}
		}
		as = append(as, a)
	}
	return as
}

// plainRun is a core without resend fed a paced stream of n frames that
// lost frames [lo, hi) for good: what a long gap the device cannot fill
// gives (a restart beyond a window, a gap filled up to one).
func plainRun(t *testing.T, clean *stream.Frames, n, lo, hi int64) (*Core, *collect) {
	core, sink := newCore(t, []int{1, 2, 3}, Config{PublishSilence: true, BinPeriod: period})
	t0 := time.Unix(1000, 0)
	for s := int64(0); s < n; s += 10 {
		for from := s; from < s+10; {
			if from >= lo && from < hi {
				from = hi
				continue
			}
			to := min(s+10, max(from+1, lo))
			if from >= hi || to <= from {
				to = s + 10
			}
			core.FramesAt(sub(clean, from, to), 0, arrival(t0, s+9))
			from = to
		}
	}
	return core, sink
}

// TestCoreLongGapResend: a paced stream loses frames [lo, hi), longer
// than a window, and the wall time covers them (the device was cut off).
// The core asks for them in requests of at most stream.MaxResendFrames
// and holds what follows: every frame resent continues the same stream
// with the clean run's decisions and state; when the device cannot
// provide them (an empty answer, no responder, no answer, a gap beyond
// its ring) the result is the run without resend: a hole of up to a
// window filled, a longer one a restart. Requests without an answer at
// the deadline are asked once more.
func TestCoreLongGapResend(t *testing.T) {
	const lo = 2000
	const n = (lo+MaxResendGap)/10*10 + 3000 // messages of 10 frames; room for a gap of the whole ring and beyond
	clean := synthFrames(0, n)
	want := reference(t, clean)
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		hi      int64
		answers []answer // in the order they come, after the frame answerAt
		reverse bool
		refuse  bool
		asked   bool
		same    bool       // the clean run's decisions and state
		lost    [2]int64   // else the run that lost frames [lost[0], lost[1]) for good ({}: [lo, hi))
		restart bool       // and the stream restarted
		again   [][2]int64 // the requests asked once more at the deadline
		stats   ResendStats
	}{
		{name: "answered in order", hi: 4300, answers: answers(lo, 4300), asked: true, same: true,
			stats: ResendStats{Answered: 3, Recovered: 2300, Long: 1}},
		{name: "answered in reverse order", hi: 4300, answers: answers(lo, 4300), reverse: true, asked: true, same: true,
			stats: ResendStats{Answered: 3, Recovered: 2300, Long: 1}},
		{name: "answers with extra frames", hi: 3500,
			answers: []answer{{lo, 1024, lo - 10, lo + 1100}, {lo + 1024, 476, lo + 1000, 3510}}, asked: true, same: true,
			stats: ResendStats{Answered: 2, Recovered: 1500, Long: 1, Ignored: 10 + 76 + 24 + 10}},
		{name: "whole ring", hi: lo + MaxResendGap, answers: answers(lo, lo+MaxResendGap), asked: true, same: true,
			stats: ResendStats{Answered: maxRequests, Recovered: MaxResendGap, Long: 1}},
		{name: "last request empty: its hole filled", hi: 4300, answers: answers(lo, 4300, 2), asked: true, lost: [2]int64{lo + 2048, 4300},
			stats: ResendStats{Answered: 2, None: 1, Recovered: 2048, Long: 1}},
		{name: "first request empty: its hole filled", hi: 4300, answers: answers(lo, 4300, 0), asked: true, lost: [2]int64{lo, lo + 1024},
			stats: ResendStats{Answered: 2, None: 1, Recovered: 1276, Long: 1}},
		{name: "every answer empty: restart", restart: true, hi: 4300, answers: answers(lo, 4300, 0, 1, 2), asked: true,
			stats: ResendStats{None: 3, Long: 1}},
		{name: "no responder: restart", restart: true, hi: 4300, refuse: true, asked: true, stats: ResendStats{None: 1}},
		{name: "no answer: restart", restart: true, hi: 4300, asked: true, again: requests(lo, 4300), stats: ResendStats{Timeout: 3, Long: 1}},
		{name: "first answer missing: its hole filled", hi: 4300, answers: answers(lo, 4300)[1:], asked: true, again: requests(lo, 4300)[:1],
			lost: [2]int64{lo, lo + 1024}, stats: ResendStats{Answered: 2, Timeout: 1, Recovered: 1276, Long: 1}},
		{name: "middle answers empty: restart after the hole", restart: true, hi: lo + 4*stream.MaxResendFrames, answers: answers(lo, lo+4*stream.MaxResendFrames, 1, 2), asked: true,
			lost: [2]int64{lo + stream.MaxResendFrames, lo + 3*stream.MaxResendFrames}, stats: ResendStats{Answered: 2, None: 2, Recovered: 2048, Long: 1}},
		{name: "beyond the device's ring: restart", restart: true, hi: lo + MaxResendGap + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, sink := newAskingCore(t, Config{})
			sink.refuse = tc.refuse
			as := tc.answers
			if tc.reverse {
				as = make([]answer, len(tc.answers))
				for i, a := range tc.answers {
					as[len(as)-1-i] = a
				}
			}
			answerAt := tc.hi/10*10 + 30 // a message's first frame
			for s := int64(0); s < n; s += 10 {
				if s >= lo && s < tc.hi {
					if s+10 > tc.hi {
						core.Receive(sub(clean, tc.hi, s+10), 0, arrival(t0, s+9))
					}
					continue
				}
				core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
				if s == answerAt {
					for _, a := range as {
						core.Resent(a.first, int(a.count), sub(clean, a.from, a.to), time.Time{})
					}
				}
			}
			if asked := len(sink.asks) > 0; asked != tc.asked {
				t.Fatalf("requests %v, asked %v", sink.asks, tc.asked)
			}
			if want := append(requests(lo, tc.hi), tc.again...); tc.asked && !tc.refuse && !equalAsks(sink.asks, want) {
				t.Fatalf("requests %v, want %v", sink.asks, want)
			}
			if core.Waiting() || core.LastSeq() != n-1 {
				t.Fatalf("waiting %v at frame %d, want every frame processed", core.Waiting(), core.LastSeq())
			}
			if got := core.ResendStats(); got != tc.stats {
				t.Errorf("resend stats %+v, want %+v", got, tc.stats)
			}
			st := core.Stats()
			if tc.same {
				if !sameDecisions(sink.got, want) {
					t.Fatalf("%d decisions differ from the clean run's %d", len(sink.got), len(want))
				}
				if st.Restarts != 0 || st.GapBins != 0 || st.OutOfStream != 0 || len(sink.events) != 1 {
					t.Errorf("stats %+v, events %v: want one stream, nothing filled or refused", st, sink.events)
				}
				if digest(t, core) != digest(t, cleanCore(t, clean)) {
					t.Error("state differs from the clean run's")
				}
				return
			}
			if restarted := st.Restarts > 0; restarted != tc.restart {
				t.Errorf("restarts %d, want a restart %v", st.Restarts, tc.restart)
			}
			lost := tc.lost
			if lost == [2]int64{} {
				lost = [2]int64{lo, tc.hi}
			}
			ref, refSink := plainRun(t, clean, n, lost[0], lost[1])
			checkSame(t, core, &sink.collect, ref, refSink)
		})
	}
}

// checkSame fails unless core's decisions, restarts, filled bins and
// state are ref's.
func checkSame(t *testing.T, core *Core, sink *collect, ref *Core, refSink *collect) {
	t.Helper()
	if !sameDecisions(sink.got, refSink.got) {
		t.Fatalf("%d decisions differ from the run without resend's %d", len(sink.got), len(refSink.got))
	}
	if st, rst := core.Stats(), ref.Stats(); st.Restarts != rst.Restarts || st.GapBins != rst.GapBins || st.OutOfStream != rst.OutOfStream {
		t.Errorf("restarts %d, gap bins %d, out of stream %d; without resend %d, %d, %d",
			st.Restarts, st.GapBins, st.OutOfStream, rst.Restarts, rst.GapBins, rst.OutOfStream)
	}
	if digest(t, core) != digest(t, ref) {
		t.Error("state differs from the run without resend's")
	}
}

func equalAsks(a [][2]int64, b [][2]int64) bool {
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

// lossyResent feeds a core a paced stream of n frames in messages of 10
// that lost the frames of gaps (bounds multiples of 10), the device
// resending each gap's frames three messages after it.
func lossyResent(t *testing.T, cfg Config, clean *stream.Frames, n int64, gaps ...[2]int64) (*Core, *asking) {
	core, sink := newAskingCore(t, cfg)
	t0 := time.Unix(1000, 0)
	for s := int64(0); s < n; s += 10 {
		lost := false
		for _, g := range gaps {
			lost = lost || s >= g[0] && s < g[1]
		}
		if !lost {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
		}
		for _, g := range gaps {
			if s == g[1]+30 {
				for _, r := range requests(g[0], g[1]) {
					core.Resent(r[0], int(r[1]), sub(clean, r[0], r[0]+r[1]), time.Time{})
				}
			}
		}
	}
	return core, sink
}

// TestCoreLongGapReplicas: two replicas that miss different frames, in
// gaps of up to the device's ring, and get them resent end with the
// clean run's decisions and byte-identical states.
func TestCoreLongGapReplicas(t *testing.T) {
	const n = 9000
	clean := synthFrames(0, n)
	want := reference(t, clean)
	a, sa := lossyResent(t, Config{Replica: true}, clean, n, [2]int64{2000, 4300}, [2]int64{6000, 6010})
	b, sb := lossyResent(t, Config{Replica: true}, clean, n, [2]int64{2500, 3100}, [2]int64{4000, 8000})
	if a.Stats().Restarts+b.Stats().Restarts != 0 || a.ResendStats().Long != 1 || b.ResendStats().Long != 1 {
		t.Fatalf("restarts %d and %d, long gaps %d and %d: want one long gap each, no restart",
			a.Stats().Restarts, b.Stats().Restarts, a.ResendStats().Long, b.ResendStats().Long)
	}
	if !sameDecisions(sa.got, want) || !sameDecisions(sb.got, want) {
		t.Fatal("a replica's decisions differ from the clean run's")
	}
	if digest(t, a) != digest(t, b) {
		t.Fatal("the replicas' states differ")
	}
}

// TestCoreLongGapMaxLag: a resent long gap is processed at once, behind
// the frames held: with MaxLag the windows due more than MaxLag bins
// behind the newest frame received are skipped (published as skipped;
// the cells step as no spike), in the same stream; without it (a
// replica) every window is decided as in the clean run.
func TestCoreLongGapMaxLag(t *testing.T) {
	const n = 6000
	clean := synthFrames(0, n)
	want := reference(t, clean)
	for _, maxLag := range []int64{0, 40} {
		core, sink := lossyResent(t, Config{MaxLag: maxLag, Backlog: func() int64 { return 0 }}, clean, n, [2]int64{2000, 4300})
		st := core.Stats()
		skipped := 0
		for _, d := range sink.got {
			if d.Kind == stream.KindSkipped {
				skipped++
			}
		}
		if st.Restarts != 0 || core.LastSeq() != n-1 || (skipped > 0) != (maxLag > 0) || uint64(skipped) != st.DeadlineMisses {
			t.Errorf("max lag %d: restarts %d, last %d, %d skipped decisions, %d deadline misses", maxLag, st.Restarts, core.LastSeq(), skipped, st.DeadlineMisses)
		}
		if maxLag == 0 && !sameDecisions(sink.got, want) {
			t.Error("without max lag: decisions differ from the clean run's")
		}
	}
}

// TestCoreLongGapNeedsWallTime: a frame far ahead that wall time does not
// cover is no gap to ask for (a foreign frame in a live stream: refused
// as without resend); one that it covers (a forged frame after a pause)
// makes a wait bounded by Config.ResendWait and counted; the device's
// frames then go on (the forged frame, confirmed with them as a new
// numbering, left no debt of wall time that would refuse them).
func TestCoreLongGapNeedsWallTime(t *testing.T) {
	clean := synthFrames(0, 8000)
	t0 := time.Unix(1000, 0)
	t.Run("live stream", func(t *testing.T) {
		core, sink := newAskingCore(t, Config{})
		for s := int64(0); s < 4000; s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
			if s == 1990 {
				core.Receive(synthFrames(1999+2000, 6), 0, arrival(t0, s+9).Add(period/2))
			}
		}
		if st := core.Stats(); len(sink.asks) != 0 || st.Restarts != 0 || st.OutOfStream != 6 || !sameDecisions(sink.got, reference(t, sub(clean, 0, 4000))) {
			t.Fatalf("requests %v, stats %+v: want none, the foreign frames refused", sink.asks, st)
		}
	})
	t.Run("forged after a pause", func(t *testing.T) {
		core, sink := newAskingCore(t, Config{})
		for s := int64(0); s < 2000; s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
		}
		at := arrival(t0, 1999+3000)
		core.Receive(synthFrames(1999+2500, 1), 0, at)
		if !core.Waiting() || len(sink.asks) != 3 {
			t.Fatalf("waiting %v, requests %v: want a wait for the 2499 frames", core.Waiting(), sink.asks)
		}
		core.Expire(at.Add(resendWait)) // asked once more
		core.Expire(at.Add(2 * resendWait))
		if core.Waiting() || core.ResendStats().Timeout != 3 || len(sink.asks) != 6 {
			t.Fatalf("after the deadline: waiting %v, stats %+v", core.Waiting(), core.ResendStats())
		}
		for s := int64(5000); s < 6200; s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
		}
		if core.Waiting() || core.LastSeq() != 6199 {
			t.Fatalf("the device's frames after the forged one: waiting %v, last %d", core.Waiting(), core.LastSeq())
		}
	})
}

// TestCoreLongGapAllocs: waiting for a long gap's frames in several
// requests and splicing them in allocate nothing.
func TestCoreLongGapAllocs(t *testing.T) {
	clean := synthFrames(0, 1<<16)
	t0 := time.Unix(1000, 0)
	core, sink := newAskingCore(t, Config{})
	sink.asks, sink.got = make([][2]int64, 0, 256), make([]stream.Decision, 0, 1<<16)
	for s := int64(0); s < 1030; s += 10 {
		core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
	}
	seq := int64(1030)
	allocs := testing.AllocsPerRun(10, func() {
		// a gap of 1500 frames, 10 frames held, two answers, 200 frames
		core.Receive(sub(clean, seq+1500, seq+1510), 0, arrival(t0, seq+1509))
		core.Resent(seq, stream.MaxResendFrames, sub(clean, seq, seq+stream.MaxResendFrames), time.Time{})
		core.Resent(seq+stream.MaxResendFrames, 1500-stream.MaxResendFrames, sub(clean, seq+stream.MaxResendFrames, seq+1500), time.Time{})
		for s := seq + 1510; s < seq+1710; s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
		}
		seq += 1710
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per long gap, want 0", allocs)
	}
	if st := core.ResendStats(); st.Long < 10 || st.Answered < 20 || core.Stats().Restarts != 0 || core.Stats().GapBins != 0 {
		t.Fatalf("resend stats %+v, core stats %+v: the measured path did not recover the gaps", st, core.Stats())
	}
}
