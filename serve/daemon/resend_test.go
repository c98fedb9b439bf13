package daemon

import (
	"testing"
	"time"

	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// asking is a Sink that is a Resender: it records the requests and
// answers refuse when refuse is set.
type asking struct {
	collect
	asks   [][2]int64
	refuse bool
}

func (a *asking) Resend(first int64, count int) bool {
	a.asks = append(a.asks, [2]int64{first, int64(count)})
	return !a.refuse
}

const resendWait = 100 * time.Millisecond

func newAskingCore(t testing.TB, cfg Config) (*Core, *asking) {
	t.Helper()
	sink := &asking{}
	cells := []int{1, 2, 3}
	cfg.Known, cfg.Cells, cfg.PublishSilence, cfg.BinPeriod = cells, cells, true, period
	if cfg.ResendWait == 0 {
		cfg.ResendWait = resendWait
	}
	c, err := New(fakepred.New(cells), sink, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, sink
}

// sub returns frames [from, to) of f as one message.
func sub(f *stream.Frames, from, to int64) *stream.Frames {
	return &stream.Frames{FirstSeq: from, Frames: f.Frames[from-f.FirstSeq : to-f.FirstSeq]}
}

// TestCoreResend: frames 2000..2019 of a paced stream are lost; the core
// asks for them and holds what follows. How the wait ends decides the
// result: every frame resent gives the clean run's decisions, none
// flagged filled, and the same state; otherwise what is missing is filled
// as without resend, and frames outside the gap are ignored and counted.
func TestCoreResend(t *testing.T) {
	const n, lo, hi = 4000, 2000, 2020
	clean := synthFrames(0, n)
	want := reference(t, clean)
	t0 := time.Unix(1000, 0)
	// lossy is the run without resend that lost frames [from, to): the
	// gap filled by holding.
	lossy := func(from, to int64) []stream.Decision {
		c, sink := newCore(t, []int{1, 2, 3}, timedCfg())
		for s := int64(0); s < n; s += 10 {
			if s+10 <= from || s >= to {
				c.FramesAt(sub(clean, s, s+10), 0, arrival(t0, s))
			} else if s < from {
				c.FramesAt(sub(clean, s, from), 0, arrival(t0, from-1))
			}
		}
		return sink.got
	}
	filled := lossy(lo, hi)
	if sameDecisions(filled, want) {
		t.Fatal("filling the gap changed no decision: the test cannot tell a recovered gap")
	}
	for _, tc := range []struct {
		name string
		// answer is what the device resends (nil: no answer); answerAt is
		// the frame after whose arrival it comes.
		answer   *stream.Frames
		answerAt int64
		refuse   bool
		same     bool  // the clean run's decisions, else the filled run's
		lost     int64 // with same false: the frames from lo on filled (0: to hi)
		stats    ResendStats
		again    bool // asked once more at the deadline
	}{
		{name: "answered", answer: sub(clean, lo, hi), answerAt: hi + 30, same: true,
			stats: ResendStats{Answered: 1, Recovered: hi - lo}},
		{name: "answered with extra frames", answer: sub(clean, lo-5, hi+5), answerAt: hi + 30, same: true,
			stats: ResendStats{Answered: 1, Recovered: hi - lo, Ignored: 10}},
		{name: "partial", answer: sub(clean, lo+10, hi), answerAt: hi + 30, lost: 10,
			stats: ResendStats{Partial: 1, Recovered: 10}},
		{name: "empty answer", answer: &stream.Frames{}, answerAt: hi + 30, stats: ResendStats{None: 1}},
		{name: "no responder", refuse: true, stats: ResendStats{None: 1}},
		{name: "timeout", again: true, stats: ResendStats{Timeout: 1}},
		{name: "answer after the deadline asked once more", answer: sub(clean, lo, hi), answerAt: hi + 150, again: true, same: true,
			stats: ResendStats{Answered: 1, Recovered: hi - lo}},
		{name: "answer after the second deadline", answer: sub(clean, lo, hi), answerAt: hi + 300, again: true,
			stats: ResendStats{Timeout: 1, Ignored: hi - lo}},
		{name: "answer outside the gap", answer: sub(clean, hi, hi+20), answerAt: hi + 30,
			stats: ResendStats{None: 1, Ignored: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, sink := newAskingCore(t, Config{})
			sink.refuse = tc.refuse
			for s := int64(0); s < n; s += 10 {
				if s >= lo && s < hi {
					continue
				}
				core.Receive(sub(clean, s, s+10), 0, arrival(t0, s))
				if tc.answer != nil && s == tc.answerAt {
					core.Resent(lo, hi-lo, tc.answer, time.Time{})
				}
			}
			if want := map[bool]int{false: 1, true: 2}[tc.again]; len(sink.asks) != want || sink.asks[0] != [2]int64{lo, hi - lo} || sink.asks[want-1] != sink.asks[0] {
				t.Fatalf("requests %v, want %d for [%d, %d)", sink.asks, want, lo, hi)
			}
			if core.Waiting() || core.LastSeq() != n-1 {
				t.Fatalf("waiting %v at frame %d, want every frame processed", core.Waiting(), core.LastSeq())
			}
			if got := core.ResendStats(); got != tc.stats {
				t.Errorf("resend stats %+v, want %+v", got, tc.stats)
			}
			ref := filled
			switch {
			case tc.same:
				ref = want
			case tc.lost > 0:
				ref = lossy(lo, lo+tc.lost)
			}
			if !sameDecisions(sink.got, ref) {
				t.Fatalf("%d decisions differ from the %s run's %d", len(sink.got), map[bool]string{true: "clean", false: "filled"}[tc.same], len(ref))
			}
			st := core.Stats()
			if tc.same != (st.GapBins == 0 && st.FilledDecisions == 0) {
				t.Errorf("gap bins %d, filled decisions %d", st.GapBins, st.FilledDecisions)
			}
			if tc.same {
				if digest(t, core) != digest(t, cleanCore(t, clean)) {
					t.Error("state differs from the clean run's")
				}
			}
		})
	}
}

// cleanCore is a core that saw every frame of f, paced.
func cleanCore(t *testing.T, f *stream.Frames) *Core {
	c, _ := newCore(t, []int{1, 2, 3}, timedCfg())
	t0 := time.Unix(1000, 0)
	for s := f.FirstSeq; s <= f.LastSeq(); s += 10 {
		c.FramesAt(sub(f, s, s+10), 0, arrival(t0, s))
	}
	return c
}

func digest(t *testing.T, c *Core) [32]byte {
	t.Helper()
	return c.Snapshot().Digest()
}

// TestCoreResendBounded: a wait ends without its answer when the
// deadline passes with nothing arriving (Expire), when the holding room
// is full, or before a control message; an untimed message and a core
// without ResendWait never wait.
func TestCoreResendBounded(t *testing.T) {
	clean := synthFrames(0, 2020+holdFrames+100) // room to fill the holding room
	t0 := time.Unix(1000, 0)
	start := func(t *testing.T, cfg Config) (*Core, *asking) {
		core, sink := newAskingCore(t, cfg)
		core.Receive(sub(clean, 0, 2000), 0, arrival(t0, 1999))
		core.Receive(sub(clean, 2010, 2020), 0, arrival(t0, 2019))
		return core, sink
	}
	t.Run("expire", func(t *testing.T) {
		core, sink := start(t, Config{})
		core.Expire(arrival(t0, 2019).Add(resendWait / 2))
		if !core.Waiting() {
			t.Fatal("wait ended before its deadline")
		}
		core.Expire(arrival(t0, 2019).Add(resendWait))
		if !core.Waiting() || len(sink.asks) != 2 {
			t.Fatalf("at the deadline: waiting %v, requests %v; want the request asked once more", core.Waiting(), sink.asks)
		}
		core.Expire(arrival(t0, 2019).Add(2 * resendWait))
		if core.Waiting() || core.LastSeq() != 2019 || core.Stats().GapBins != 10 || core.ResendStats().Timeout != 1 {
			t.Fatalf("after the deadline: waiting %v, last %d, stats %+v", core.Waiting(), core.LastSeq(), core.ResendStats())
		}
	})
	t.Run("holding room", func(t *testing.T) {
		core, _ := start(t, Config{ResendWait: time.Hour})
		s := int64(2020)
		for ; core.Waiting(); s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s))
		}
		if s-2010 > holdFrames+10 || core.LastSeq() != s-1 || core.ResendStats().Timeout != 1 {
			t.Fatalf("holding full: waiting %v, last %d, stats %+v", core.Waiting(), core.LastSeq(), core.ResendStats())
		}
	})
	t.Run("control", func(t *testing.T) {
		core, _ := start(t, Config{})
		core.EndWait()
		core.Control(&stream.Control{Op: stream.OpReset})
		if core.Waiting() || core.Stats().Frames != 2010 || core.ResendStats().Timeout != 1 {
			t.Fatalf("after a control message: waiting %v, stats %+v", core.Waiting(), core.Stats())
		}
	})
	t.Run("untimed", func(t *testing.T) {
		core, sink := newAskingCore(t, Config{})
		core.Receive(sub(clean, 0, 2000), 0, time.Time{})
		core.Receive(sub(clean, 2010, 2020), 0, time.Time{})
		if core.Waiting() || len(sink.asks) != 0 || core.Stats().GapBins != 10 {
			t.Fatalf("untimed: waiting %v, requests %v", core.Waiting(), sink.asks)
		}
	})
	t.Run("negative wait", func(t *testing.T) {
		cells := []int{1}
		if _, err := New(fakepred.New(cells), &asking{}, Config{Known: cells, Cells: cells, ResendWait: -1}); err == nil {
			t.Fatal("a negative resend wait accepted")
		}
	})
}

// TestCoreResendAllocs: receiving frames, holding them through a wait
// and splicing the answer in allocate nothing.
func TestCoreResendAllocs(t *testing.T) {
	clean := synthFrames(0, 1<<16)
	t0 := time.Unix(1000, 0)
	core, sink := newAskingCore(t, Config{})
	sink.asks, sink.got = make([][2]int64, 0, 256), make([]stream.Decision, 0, 1<<16)
	core.Receive(sub(clean, 0, 1024), 0, arrival(t0, 1023))
	seq := int64(1024)
	allocs := testing.AllocsPerRun(200, func() {
		// a gap of 5 frames, 20 frames held, the answer
		core.Receive(sub(clean, seq+5, seq+15), 0, arrival(t0, seq+14))
		core.Receive(sub(clean, seq+15, seq+25), 0, arrival(t0, seq+24))
		core.Resent(seq, 5, sub(clean, seq, seq+5), time.Time{})
		for s := seq + 25; s < seq+100; s++ {
			core.Receive(sub(clean, s, s+1), 0, arrival(t0, s))
		}
		seq += 100
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per wait and 75 frames, want 0", allocs)
	}
	if st := core.ResendStats(); st.Answered < 200 || core.Stats().GapBins != 0 || len(sink.got) < 100 {
		t.Fatalf("resend stats %+v, gap bins %d, %d decisions: the measured path did not wait and decide", st, core.Stats().GapBins, len(sink.got))
	}
}

// TestCoreResendHeldFramesAreBacklog: the frames held through a wait
// count as received for the overload policy, as queued frames do: 200
// frames held behind a gap make the decisions due more than MaxLag bins
// behind them skipped once the answer comes; without MaxLag none is.
func TestCoreResendHeldFramesAreBacklog(t *testing.T) {
	clean := synthFrames(0, 4000)
	t0 := time.Unix(1000, 0)
	for _, maxLag := range []int64{0, 40} {
		core, _ := newAskingCore(t, Config{MaxLag: maxLag, Backlog: func() int64 { return 0 }, ResendWait: time.Hour})
		for s := int64(0); s < 2000; s++ {
			core.Receive(sub(clean, s, s+1), 0, arrival(t0, s))
		}
		for s := int64(2010); s < 2210; s++ {
			core.Receive(sub(clean, s, s+1), 0, arrival(t0, s)) // held
		}
		before := core.Stats().DeadlineMisses
		core.Resent(2000, 10, sub(clean, 2000, 2010), time.Time{})
		skipped := core.Stats().DeadlineMisses - before
		if (skipped > 0) != (maxLag > 0) || core.LastSeq() != 2209 {
			t.Errorf("max lag %d: %d decisions skipped, last %d", maxLag, skipped, core.LastSeq())
		}
	}
}

// TestCoreResendAskedLate: the frame after a 20-frame gap reaches two
// replicas at the same time, but one processes it 250 ms later (behind a
// burst of queued frames after a reconnect), so its request goes out
// then and the answer comes 300 ms after the frame's arrival, while the
// frames queued behind it arrived long before (the prompt one's answer
// comes 50 ms after the arrival). Dated from the request's
// departure (Asked), its wait holds them until the answer, and both
// replicas end with the clean run's decisions and state; dated from the
// arrival, the wait would end at the first frame 100 ms after it, ask
// once more and end 200 ms after it, and the gap be filled on one replica
// only.
func TestCoreResendAskedLate(t *testing.T) {
	const n, lo, hi = 4000, 2000, 2020
	clean := synthFrames(0, n)
	t0 := time.Unix(1000, 0)
	gapAt := arrival(t0, hi+9)
	run := func(delay time.Duration, asked bool) (*Core, *asking) {
		c, sink := newAskingCore(t, Config{})
		for s := int64(0); s < n; s += 10 {
			if s >= lo && s < hi {
				continue
			}
			c.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
			if s == hi && asked {
				c.Asked(gapAt.Add(delay))
			}
			if answer := gapAt.Add(delay + 50*time.Millisecond); !arrival(t0, s+9).Before(answer) && arrival(t0, s-1).Before(answer) {
				c.Resent(lo, hi-lo, sub(clean, lo, hi), answer) // after the frames that arrived before it
			}
		}
		return c, sink
	}
	want := digest(t, cleanCore(t, clean))
	for _, tc := range []struct {
		name  string
		delay time.Duration
		asked bool
		same  bool
	}{
		{name: "prompt replica", delay: 0, asked: true, same: true},
		{name: "late replica, wait from the departure", delay: 250 * time.Millisecond, asked: true, same: true},
		{name: "late replica, wait from the arrival", delay: 250 * time.Millisecond, asked: false, same: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := run(tc.delay, tc.asked)
			if want := map[bool]int{true: 1, false: 2}[tc.same]; len(sink.asks) != want || c.Waiting() || c.LastSeq() != n-1 {
				t.Fatalf("requests %v, waiting %v at %d", sink.asks, c.Waiting(), c.LastSeq())
			}
			st := c.ResendStats()
			if got := digest(t, c) == want; got != tc.same || (st.Answered == 1) != tc.same {
				t.Fatalf("state equal to the clean run's: %v, resend stats %+v; want answered and equal: %v", got, st, tc.same)
			}
		})
	}
}

// TestCoreResendBurst: after a reconnect, the frames a device buffered
// while cut off come at once, 3000 of them, with a 20-frame gap at their
// start and, with lost, 30 frames lost inside them (a slow consumer's
// drop). The core holds the whole burst (holdFrames) until the gap's
// answer; the gap inside it then starts a wait of its own (chain) instead
// of being filled, and once its answer comes the core ends with the clean
// run's decisions and state.
func TestCoreResendBurst(t *testing.T) {
	const n, lo, hi, burst, lost = 6000, 2000, 2020, 3000, 3500
	clean := synthFrames(0, n)
	t0 := time.Unix(1000, 0)
	for _, inner := range []bool{false, true} {
		core, sink := newAskingCore(t, Config{})
		for s := int64(0); s < lo; s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
		}
		at := arrival(t0, hi+burst) // the burst comes at once, late
		for s := int64(hi); s < hi+burst; s += 10 {
			if !inner || s < lost || s >= lost+30 {
				core.Receive(sub(clean, s, s+10), 0, at)
			}
		}
		if !core.Waiting() || len(sink.asks) != 1 {
			t.Fatalf("after the burst: waiting %v, requests %v; want the burst held", core.Waiting(), sink.asks)
		}
		core.Resent(lo, hi-lo, sub(clean, lo, hi), at.Add(time.Millisecond))
		if inner {
			if !core.Waiting() || len(sink.asks) != 2 || sink.asks[1] != [2]int64{lost, 30} || core.LastSeq() != lost-1 {
				t.Fatalf("after the first answer: waiting %v at %d, requests %v; want a wait for [%d, %d)", core.Waiting(), core.LastSeq(), sink.asks, lost, lost+30)
			}
			core.Resent(lost, 30, sub(clean, lost, lost+30), at.Add(2*time.Millisecond))
		}
		for s := int64(hi + burst); s < n; s += 10 {
			core.Receive(sub(clean, s, s+10), 0, arrival(t0, s+9))
		}
		if core.Waiting() || core.LastSeq() != n-1 || core.Stats().GapBins != 0 || digest(t, core) != digest(t, cleanCore(t, clean)) {
			t.Fatalf("inner gap %v: waiting %v at %d, %d gap bins: want the clean run's state", inner, core.Waiting(), core.LastSeq(), core.Stats().GapBins)
		}
	}
}
