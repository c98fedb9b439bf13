package daemon

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// delivery is one frames message of a timed test: frames [first, first+n)
// of the stream, arriving at at. A forged one is left out of the
// reference run.
type delivery struct {
	first, n int64
	at       time.Time
	forged   bool
}

// paced returns the messages of a paced device sending frames [lo, hi) in
// messages of per frames, each arriving as its last frame falls due.
func paced(t0 time.Time, lo, hi, per int64) []delivery {
	var ds []delivery
	for s := lo; s < hi; s += per {
		n := min(per, hi-s)
		ds = append(ds, delivery{first: s, n: n, at: arrival(t0, s+n-1)})
	}
	return ds
}

// burst returns frames [lo, hi) in messages of per frames, all arriving at
// at (a backlog delivered at once).
func burst(at time.Time, lo, hi, per int64) []delivery {
	var ds []delivery
	for s := lo; s < hi; s += per {
		ds = append(ds, delivery{first: s, n: min(per, hi-s), at: at})
	}
	return ds
}

func joined(parts ...[]delivery) []delivery {
	var ds []delivery
	for _, p := range parts {
		ds = append(ds, p...)
	}
	return ds
}

// feed gives the messages to a core, timed or not (timed false: the
// frame-count rules alone, which fill a gap of up to a window at once).
func feed(core *Core, f *stream.Frames, ds []delivery, timed bool) {
	for _, d := range ds {
		m := &stream.Frames{FirstSeq: d.first, Frames: f.Frames[d.first-f.FirstSeq : d.first-f.FirstSeq+d.n]}
		if timed {
			core.FramesAt(m, 0, d.at)
		} else {
			core.Frames(m, 0)
		}
	}
}

// TestCoreTimedLateDelivery: a paced device (992 Hz) whose daemon receives
// nothing for 1.5 s (a paused process), then the frames buffered meanwhile
// all at once, some of them missing (a slow-consumer drop), then the live
// frames on time. The live frames continue the stream: the missing frames
// are an ordinary gap, filled at once as the frame-count rules fill it; no
// frame is refused and the stream does not restart. Frames ahead of the
// device's schedule by more than the credit stay refused, late delivery or
// not: a clock running ahead is told from a late delivery by the frames'
// offset from the stream's most on-time one.
func TestCoreTimedLateDelivery(t *testing.T) {
	const (
		pause  = 1488 // bins the daemon receives nothing (1.5 s)
		resume = 3000 + pause
		end    = 6000
	)
	f := synthFrames(0, end+100)
	t0 := time.Unix(1000, 0)
	tr := arrival(t0, resume) // the daemon resumes: the buffered frames arrive
	forged := func(ds []delivery) []delivery {
		for i := range ds {
			ds[i].forged = true
		}
		return ds
	}
	for _, tc := range []struct {
		name     string
		ds       []delivery
		gap, out uint64 // want: bins filled, frames refused
		last     int64  // want: the stream's last bin
	}{
		{name: "buffered frames one a message, then a drop", ds: joined(
			paced(t0, 0, 3000, 1), burst(tr, 3000, 3600, 1), paced(t0, resume, end, 1)),
			gap: pause - 600, last: end - 1},
		{name: "buffered frames 32 a message, then a drop", ds: joined(
			paced(t0, 0, 3000, 32), burst(tr, 3000, 3600, 32), paced(t0, resume, end, 32)),
			gap: pause - 600, last: end - 1},
		{name: "two drops in the buffered frames", ds: joined(
			paced(t0, 0, 3000, 1), burst(tr, 3000, 3300, 1), burst(tr, 3700, 4000, 1), paced(t0, resume, end, 1)),
			gap: pause - 600, last: end - 1},
		{name: "the drop first, then the buffered frames", ds: joined(
			paced(t0, 0, 3000, 1), burst(tr, 3000+pause-600, resume, 1), paced(t0, resume, end, 1)),
			gap: pause - 600, last: end - 1},
		{name: "a frame 50 bins ahead of the live frames after the late delivery", ds: joined(
			paced(t0, 0, 3000, 1), burst(tr, 3000, 3600, 1), paced(t0, resume, 4600, 1),
			forged(burst(arrival(t0, 4599).Add(period/2), 4599+50, 4600+50, 1)), paced(t0, 4600, end, 1)),
			gap: pause - 600, out: 1, last: end - 1},
		{name: "a frame 50 bins ahead with the buffered frames", ds: joined(
			paced(t0, 0, 3000, 1), burst(tr, 3000, 3600, 1), forged(burst(tr, resume+50, resume+51, 1)),
			paced(t0, resume, end, 1)),
			gap: pause - 600, out: 1, last: end - 1},
		{name: "frames early (a clock running ahead), then a jump", ds: joined(
			paced(t0, 0, 3000, 1), burst(arrival(t0, 3000), 3000, 3600, 1),
			forged(burst(arrival(t0, 3000).Add(period/2), resume, resume+DefaultConfirmFrames, 1)), paced(t0, 3600, end, 1)),
			out: DefaultConfirmFrames, last: end - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var real []delivery
			for _, d := range tc.ds {
				if !d.forged {
					real = append(real, d)
				}
			}
			ref, want := newCore(t, []int{1, 2, 3}, timedCfg())
			feed(ref, f, real, false)
			core, sink := newCore(t, []int{1, 2, 3}, timedCfg())
			feed(core, f, tc.ds, true)
			st := core.Stats()
			if st.GapBins != tc.gap || st.OutOfStream != tc.out || st.Restarts != 0 || st.Stale != 0 ||
				core.Epoch() != 1 || len(sink.events) != 1 || core.LastSeq() != tc.last {
				t.Fatalf("stats %+v, epoch %d, %d events, last %d: want %d bins filled, %d frames refused, no restart, last %d",
					st, core.Epoch(), len(sink.events), core.LastSeq(), tc.gap, tc.out, tc.last)
			}
			if ref.Stats().GapBins != tc.gap || !sameDecisions(sink.got, want.got) {
				t.Fatalf("%d decisions, the frame-count rules' %d (gap %d bins): want the same",
					len(sink.got), len(want.got), ref.Stats().GapBins)
			}
		})
	}
}

// TestCoreTimedScheduleForgets: a device whose clock runs 1% slow falls
// behind wall time by about 10 bins a second; the stream's schedule is its
// most on-time frame of the last 15 to 30 s only, so the lag it lends a gap
// stays under 1% of 30 s (about 300 bins) however long the stream runs. A
// frame 400 bins ahead of the live frames after 60 s is refused (a
// schedule that never forgot would lend about 590 bins).
func TestCoreTimedScheduleForgets(t *testing.T) {
	const n = 60 * 992
	f := synthFrames(0, n+500)
	t0 := time.Unix(1000, 0)
	slow := func(seq int64) time.Time { return t0.Add(time.Duration(seq) * period * 101 / 100) }
	core, _ := newCore(t, []int{1}, timedCfg())
	for s := range int64(n) {
		core.FramesAt(one(f, s), 0, slow(s))
	}
	core.FramesAt(one(f, n-1+400), 0, slow(n-1).Add(period/2))
	core.FramesAt(one(f, n), 0, slow(n))
	st := core.Stats()
	if st.OutOfStream != 1 || st.GapBins != 0 || core.LastSeq() != n {
		t.Fatalf("stats %+v, last %d: want the frame 400 bins ahead refused, the device's next frame taken", st, core.LastSeq())
	}
}

// TestCoreTimedZeroAllocs: the timed per-frame path (dating each frame on
// the stream's schedule, across its 15 s spans) allocates nothing.
func TestCoreTimedZeroAllocs(t *testing.T) {
	cells := []int{1, 2, 3}
	core, err := New(fakepred.New(cells), &countSink{}, Config{Known: cells, Cells: cells, PublishSilence: true, BinPeriod: period})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	core.FramesAt(synthFrames(0, 1024), 0, arrival(t0, 1023))
	one := synthFrames(1024, 1)
	allocs := testing.AllocsPerRun(40000, func() {
		at := arrival(t0, one.FirstSeq)
		if one.FirstSeq%97 == 0 {
			at = at.Add(30 * period) // late now and then: the lag is kept
		}
		core.FramesAt(one, 0, at)
		one.FirstSeq++
	})
	if allocs != 0 || core.Stats().Frames != 1024+40001 {
		t.Fatalf("%v allocs per frame, stats %+v: want 0, every frame accepted", allocs, core.Stats())
	}
}

// TestCoreTimedGapsGainNoTime: a publisher that owns the stream's
// numbering and, every few bins of wall time, sends the next frame and then
// one far ahead, has its gaps believed only as far as wall time allows: the
// bins filled stay within the wall time that passed plus the credit, also
// while the stream lags its schedule between its frames.
func TestCoreTimedGapsGainNoTime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		every, jump int64 // bins of wall time between rounds; the gap each round tries
		rounds      int64
	}{
		{"a jump of 40 every 20 bins", 20, 40, 200},
		{"a jump of 32 every bin", 1, 32, 4000},
		{"a jump of 1000 every 500 bins", 500, 1000, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := synthFrames(0, int(3000+tc.rounds*(tc.jump+2)))
			t0 := time.Unix(1000, 0)
			core, _ := newCore(t, []int{1}, timedCfg())
			for s := range int64(3000) {
				core.FramesAt(one(f, s), 0, arrival(t0, s))
			}
			for i := range tc.rounds {
				at := arrival(t0, 2999+(i+1)*tc.every)
				last := core.LastSeq()
				core.FramesAt(one(f, last+1), 0, at)
				core.FramesAt(one(f, last+2+tc.jump), 0, at)
			}
			wall := uint64(tc.rounds * tc.every)
			if st := core.Stats(); st.GapBins > wall+DefaultGapSlack || st.Restarts != 0 {
				t.Fatalf("stats %+v: %d bins filled in %d bins of wall time, want at most %d more", st, st.GapBins, wall, DefaultGapSlack)
			}
		})
	}
}

// TestCoreTimedReplicasAgree: two replicas receive the same frames at
// their own times (the standby 0.3 ms later); the standby restores the
// holder's snapshot mid-stream, keeping its own dates, and both go through
// a late delivery after a pause. Both continue the stream with the same
// decisions and end with equal snapshots: the dates, the only state that
// depends on arrival times, are no part of the snapshot.
func TestCoreTimedReplicasAgree(t *testing.T) {
	const pause, resume, end = 1488, 3000 + 1488, 6000
	f := synthFrames(0, end)
	t0 := time.Unix(1000, 0)
	before := paced(t0, 0, 3000, 1)
	after := joined(burst(arrival(t0, resume), 3000, 3600, 1), paced(t0, resume, end, 1))
	later := func(ds []delivery) []delivery {
		out := slices.Clone(ds)
		for i := range out {
			out[i].at = out[i].at.Add(300 * time.Microsecond)
		}
		return out
	}
	holder, hs := newCore(t, []int{1, 2, 3}, timedCfg())
	standby, ss := newCore(t, []int{1, 2, 3}, timedCfg())
	feed(holder, f, before, true)
	feed(standby, f, later(before[:2000]), true)
	if err := standby.Restore(holder.Snapshot()); err != nil {
		t.Fatal(err)
	}
	n, m := len(hs.got), len(ss.got)
	feed(holder, f, after, true)
	feed(standby, f, later(after), true)
	for _, c := range []*Core{holder, standby} {
		if st := c.Stats(); st.OutOfStream != 0 || st.Restarts != 0 || c.LastSeq() != end-1 {
			t.Fatalf("stats %+v, last %d: want the stream continued to %d", st, c.LastSeq(), end-1)
		}
	}
	if len(hs.got)-n < 100 || !sameDecisions(ss.got[m:], hs.got[n:]) || !reflect.DeepEqual(holder.Snapshot(), standby.Snapshot()) {
		t.Fatalf("standby: %d decisions after the restore, holder %d; snapshots equal %v",
			len(ss.got)-m, len(hs.got)-n, reflect.DeepEqual(holder.Snapshot(), standby.Snapshot()))
	}
}
