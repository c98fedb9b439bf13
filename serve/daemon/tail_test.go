package daemon

import (
	"slices"
	"testing"
	"time"

	"rgcpred/stream"
)

// tailRun feeds a replica core a paced stream of n frames in messages of
// 10, the last miss of them never arriving (a replica whose subscription
// was not back when the device sent its last frames).
func tailRun(t *testing.T, clean *stream.Frames, n, miss int64, refuse bool) (*Core, *asking) {
	core, sink := newAskingCore(t, Config{Replica: true})
	sink.refuse = refuse
	t0 := time.Unix(1000, 0)
	for s := int64(0); s < n-miss; s += 10 {
		core.Receive(sub(clean, s, min(s+10, n-miss)), 0, arrival(t0, s+9))
	}
	return core, sink
}

// TestCoreTail: two replicas of a paced stream, one missing its last 50
// frames. After TailAfter of silence each asks the device for the frames
// after its last one; the device resends the 50 to the one that missed
// them (the other gets an empty answer), and both end with the clean
// run's decisions and byte-identical states, the wall-time rule taking
// the resent frames. No second request goes out while the answer may
// still come, nor after it during the same silence; one does after a new
// frame. A device that does not resend, an empty answer, an answer after
// a reset, and a wait pending for a gap leave the run as without the
// request; a request not answered (or not sent) is asked again TailAfter
// later.
func TestCoreTail(t *testing.T) {
	const n, miss = 4000, 50
	clean := synthFrames(0, n)
	want := reference(t, clean)
	t0 := time.Unix(1000, 0)
	lastAt := arrival(t0, n-miss-1) // the arrival of the last frame the short replica got
	full, fullSink := tailRun(t, clean, n, 0, false)
	if !sameDecisions(fullSink.got, want) {
		t.Fatal("the undisturbed replica's decisions differ from the clean run's")
	}
	short, _ := tailRun(t, clean, n, miss, false)
	if digest(t, short) == digest(t, full) {
		t.Fatal("missing the last frames changed no state: the test cannot tell a recovered tail")
	}
	missed := digest(t, short)

	t.Run("asked once, resent, replicas equal", func(t *testing.T) {
		a, sa := tailRun(t, clean, n, 0, false)
		b, sb := tailRun(t, clean, n, miss, false)
		if b.AskTail(lastAt.Add(TailAfter-time.Millisecond)) || len(sb.asks) != 0 {
			t.Fatalf("asked %v before TailAfter of silence", sb.asks)
		}
		for i := range 10 {
			now := lastAt.Add(TailAfter + time.Duration(i)*25*time.Millisecond)
			a.AskTail(now.Add(miss * period))
			b.AskTail(now)
		}
		if len(sb.asks) != 1 || sb.asks[0] != [2]int64{n - miss, stream.MaxResendFrames} ||
			len(sa.asks) != 1 || sa.asks[0] != [2]int64{n, stream.MaxResendFrames} {
			t.Fatalf("requests %v and %v over 10 ticks of one silence, want one each for the frames after the last", sa.asks, sb.asks)
		}
		a.Resent(n, stream.MaxResendFrames, &stream.Frames{}, lastAt.Add(time.Second))
		// A late answer (a second after the request) with a frame before
		// the tail: the wall-time rule takes it, the extra one is ignored.
		b.Resent(n-miss, stream.MaxResendFrames, sub(clean, n-miss-1, n), lastAt.Add(time.Second))
		if !sameDecisions(sb.got, want) || !sameDecisions(sa.got, want) {
			t.Fatalf("decisions: %d and %d, want the clean run's %d", len(sa.got), len(sb.got), len(want))
		}
		if digest(t, a) != digest(t, b) || digest(t, b) != digest(t, full) {
			t.Fatal("the replicas' states differ")
		}
		st := b.Stats()
		if st.OutOfStream != 0 || st.Restarts != 0 || st.GapBins != 0 || b.Held() != 0 || b.LastSeq() != n-1 {
			t.Fatalf("resent tail: stats %+v, held %d, last %d", st, b.Held(), b.LastSeq())
		}
		if got := b.ResendStats(); got != (ResendStats{Tail: 1, Recovered: miss, Ignored: 1}) {
			t.Fatalf("resend stats %+v", got)
		}
		if b.AskTail(lastAt.Add(time.Hour)) {
			t.Fatal("asked again after the resent frames, with no new frame")
		}
		// A new frame ends the silence: the next one asks again.
		b.Receive(sub(synthFrames(n, 10), n, n+10), 0, lastAt.Add(2*time.Hour))
		if !b.AskTail(lastAt.Add(2*time.Hour+TailAfter)) || len(sb.asks) != 2 || sb.asks[1][0] != n+10 {
			t.Fatalf("after a new frame: requests %v, want a second one from %d", sb.asks, n+10)
		}
	})

	for _, tc := range []struct {
		name   string
		refuse bool                        // the device does not serve resend
		before func(c *Core)               // before the silence's tick
		answer func(c *Core, at time.Time) // the answer
		asked  int
		stats  ResendStats
	}{
		{name: "request not sent: tried again after TailAfter", refuse: true, asked: 2},
		{name: "empty answer", asked: 2, stats: ResendStats{Tail: 2},
			answer: func(c *Core, at time.Time) { c.Resent(n-miss, stream.MaxResendFrames, &stream.Frames{}, at) }},
		{name: "no answer", asked: 2, stats: ResendStats{Tail: 2}},
		{name: "answer after a reset", asked: 2, stats: ResendStats{Tail: 2, Ignored: miss},
			answer: func(c *Core, at time.Time) {
				c.Control(&stream.Control{Op: stream.OpReset})
				c.Resent(n-miss, stream.MaxResendFrames, sub(clean, n-miss, n), at)
			}},
		{name: "answer with a hole before it", asked: 2, stats: ResendStats{Tail: 2, Ignored: miss - 5},
			answer: func(c *Core, at time.Time) { c.Resent(n-miss, stream.MaxResendFrames, sub(clean, n-miss+5, n), at) }},
		{name: "reset pending at the next frame", before: func(c *Core) {
			c.Control(&stream.Control{Op: stream.OpResetAt, Epoch: c.Epoch(), At: n - miss})
		}},
		{name: "a gap's wait pending", asked: 2, stats: ResendStats{Timeout: 1}, before: func(c *Core) {
			c.Receive(sub(clean, n-miss+10, n-miss+20), 0, lastAt.Add(10*period)) // asks for [n-miss, n-miss+10)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := tailRun(t, clean, n, miss, tc.refuse)
			ref, _ := tailRun(t, clean, n, miss, false)
			if tc.before != nil {
				tc.before(c)
				tc.before(ref)
			}
			for i := range 20 {
				c.AskTail(lastAt.Add(TailAfter + time.Duration(i)*25*time.Millisecond))
			}
			if tc.answer != nil {
				tc.answer(c, lastAt.Add(time.Second))
				tc.answer(ref, lastAt.Add(time.Second))
			}
			for _, x := range []*Core{c, ref} {
				x.Expire(lastAt.Add(time.Hour)) // a gap's requests asked once more
				x.Expire(lastAt.Add(2 * time.Hour))
			}
			if len(sink.asks) != tc.asked {
				t.Fatalf("requests %v, want %d", sink.asks, tc.asked)
			}
			if got := c.ResendStats(); got != tc.stats {
				t.Errorf("resend stats %+v, want %+v", got, tc.stats)
			}
			if digest(t, c) != digest(t, ref) {
				t.Error("the state differs from the run without the request")
			}
			if tc.before == nil && c.Stats().Resets == 0 && digest(t, c) != missed {
				t.Error("the state differs from the replica's that missed the tail")
			}
		})
	}
}

// TestCoreTailAllocs: asking for a silent stream's tail and continuing
// the stream with the answer allocate nothing.
func TestCoreTailAllocs(t *testing.T) {
	clean := synthFrames(0, 1<<16)
	t0 := time.Unix(1000, 0)
	core, sink := newAskingCore(t, Config{Replica: true})
	sink.asks, sink.got = make([][2]int64, 0, 256), make([]stream.Decision, 0, 1<<16)
	core.Receive(sub(clean, 0, 1024), 0, arrival(t0, 1023))
	seq := int64(1024)
	at := arrival(t0, 1023)
	allocs := testing.AllocsPerRun(100, func() {
		// 90 frames live, a silence, the last 10 resent
		for s := seq; s < seq+90; s += 10 {
			at = at.Add(10 * period)
			core.Receive(sub(clean, s, s+10), 0, at)
		}
		at = at.Add(TailAfter)
		core.AskTail(at)
		core.Resent(seq+90, stream.MaxResendFrames, sub(clean, seq+90, seq+100), at)
		seq += 100
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per tail and 90 frames, want 0", allocs)
	}
	if st := core.ResendStats(); st.Tail < 100 || st.Recovered < 1000 || core.LastSeq() != seq-1 || len(sink.got) < 100 {
		t.Fatalf("resend stats %+v, last %d, %d decisions: the measured path did not ask and continue", st, core.LastSeq(), len(sink.got))
	}
}

// TestCoreTailRetry: a silence's tail request that gets no answer (lost
// in a cut, the device behind a partition: NATS "no responders") is asked
// again TailAfter later, then at doubling pauses capped at
// tailBackoffMax, at once after a reconnect, and not after TailGiveUp of
// silence; the answer that finally comes continues the stream to the
// undisturbed replica's state. An answer (empty included) ends the
// silence's requests; a second answer to a request asked twice is
// ignored and counted.
func TestCoreTailRetry(t *testing.T) {
	const n, miss = 4000, 50
	clean := synthFrames(0, n)
	lastAt := arrival(time.Unix(1000, 0), n-miss-1)
	full, _ := tailRun(t, clean, n, 0, false)
	every := []time.Duration{250, 500, 1000} // ms after the last frame
	for ms := time.Duration(2000); ms <= TailGiveUp/time.Millisecond; ms += 1000 {
		every = append(every, ms)
	}
	tail := [2]int64{n - miss, stream.MaxResendFrames}
	frames := sub(clean, n-miss, n)
	for _, tc := range []struct {
		name      string
		answers   map[int]*stream.Frames // by try (1-based), answered right after it; nil: no responders
		reconnect time.Duration          // ms after the last frame (0: none)
		want      []time.Duration        // the tries, ms after the last frame
		ignored   uint64
		equal     bool // ends in the undisturbed replica's state
	}{
		{name: "never answered", want: every},
		{name: "no responders thrice, then the frames", want: every[:4], equal: true,
			answers: map[int]*stream.Frames{1: nil, 2: nil, 3: nil, 4: frames}},
		{name: "empty answer ends it", want: every[:1], answers: map[int]*stream.Frames{1: {}}},
		{name: "first answer late, after the second try", want: every[:2], ignored: miss, equal: true,
			answers: map[int]*stream.Frames{2: frames, 3: frames}},
		{name: "reconnect: asked at once", reconnect: 5500, want: append(slices.Clone(every[:7]), 5500), equal: true,
			answers: map[int]*stream.Frames{8: frames}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := tailRun(t, clean, n, miss, false)
			var at []time.Duration
			for tick := time.Duration(0); tick <= 2*TailGiveUp; tick += 25 * time.Millisecond {
				now := lastAt.Add(tick)
				if tc.reconnect > 0 && tick == tc.reconnect*time.Millisecond {
					c.Reconnected()
				}
				if !c.AskTail(now) {
					continue
				}
				at = append(at, tick/time.Millisecond)
				if f, ok := tc.answers[len(at)]; ok {
					c.Resent(tail[0], int(tail[1]), f, now.Add(time.Millisecond))
				}
				if f, ok := tc.answers[len(at)+1]; ok && len(at) == 2 && tc.ignored > 0 {
					c.Resent(tail[0], int(tail[1]), f, now.Add(time.Millisecond)) // the second copy
				}
			}
			if !slices.Equal(at, tc.want) || len(sink.asks) != len(tc.want) {
				t.Fatalf("%d requests at %v ms, want them at %v ms", len(sink.asks), at, tc.want)
			}
			for i, a := range sink.asks {
				if a != tail {
					t.Fatalf("request %d: %v, want %v", i, a, tail)
				}
			}
			st := c.ResendStats()
			if st.Tail != uint64(len(tc.want)) || st.Ignored != tc.ignored {
				t.Errorf("resend stats %+v, want %d tail requests, %d ignored", st, len(tc.want), tc.ignored)
			}
			if got := digest(t, c) == digest(t, full); got != tc.equal {
				t.Errorf("state equal to the undisturbed replica's: %v, want %v", got, tc.equal)
			}
		})
	}
}

// TestCoreTailLong: a replica misses a stream's last 3000 frames, more
// than one request asks for. Each full answer has the frames after it
// asked for at the next call, without waiting for the backoff: three
// requests, and the replica ends in the undisturbed one's state; the
// last, shorter answer ends the silence's requests.
func TestCoreTailLong(t *testing.T) {
	const n, miss = 8000, 3000
	clean := synthFrames(0, n)
	lastAt := arrival(time.Unix(1000, 0), n-miss-1)
	full, _ := tailRun(t, clean, n, 0, false)
	c, sink := tailRun(t, clean, n, miss, false)
	for tick := time.Duration(0); tick <= 5*time.Second; tick += 25 * time.Millisecond {
		now := lastAt.Add(tick)
		if c.AskTail(now) {
			a := sink.asks[len(sink.asks)-1]
			c.Resent(a[0], int(a[1]), sub(clean, a[0], min(a[0]+a[1], n)), now.Add(time.Millisecond))
		}
	}
	want := [][2]int64{{n - miss, 1024}, {n - miss + 1024, 1024}, {n - miss + 2048, 1024}}
	if !slices.Equal(sink.asks, want) {
		t.Fatalf("requests %v, want %v", sink.asks, want)
	}
	if digest(t, c) != digest(t, full) || c.ResendStats().Recovered != miss {
		t.Fatalf("state equal %v, resend stats %+v: want the undisturbed replica's state, %d recovered", digest(t, c) == digest(t, full), c.ResendStats(), miss)
	}
}
