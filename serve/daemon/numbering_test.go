package daemon

import (
	"testing"
	"time"

	"rgcpred/stream"
)

// period is the bin period of the timed tests (a real-time stream's).
const period = time.Second / 992

// timedCfg is the configuration of the timed numbering tests.
func timedCfg() Config { return Config{PublishSilence: true, MaxLag: 40, BinPeriod: period} }

// arrival is the arrival time of frame seq of a paced stream starting at
// t0.
func arrival(t0 time.Time, seq int64) time.Time { return t0.Add(time.Duration(seq) * period) }

// TestCoreTimedForeignFramesLoseNothing: with wall time, messages of a
// forged numbering sent between the frames of a paced stream never move
// it: no restart, no real frame rejected, the clean run's decisions.
// Protocol.md: "no message can make the daemon believe it is behind".
func TestCoreTimedForeignFramesLoseNothing(t *testing.T) {
	clean := synthFrames(0, 4000)
	want := reference(t, clean)
	for _, tc := range []struct {
		name    string
		foreign *stream.Frames
	}{
		{"6 frames at last+1000", synthFrames(1999+1000, 6)},
		{"16 frames at seq 10^12 in one message", synthFrames(1_000_000_000_000, 16)},
		{"a window's worth at last+40 (beyond the slack)", synthFrames(1999+40, 1024)},
		{"32 frames far behind", synthFrames(100, 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, sink := newCore(t, []int{1, 2, 3}, timedCfg())
			t0 := time.Unix(1000, 0)
			for s := int64(0); s < 4000; s++ {
				core.FramesAt(one(clean, s), 0, arrival(t0, s))
				if s == 1999 {
					core.FramesAt(tc.foreign, 0, arrival(t0, s).Add(period/2))
				}
			}
			st := core.Stats()
			if !sameDecisions(sink.got, want) {
				t.Fatalf("decisions changed by foreign frames (stats %+v)", st)
			}
			held := min(uint64(len(tc.foreign.Frames)), DefaultConfirmFrames)
			if st.Restarts != 0 || st.Stale != 0 || st.GapBins != 0 || st.DeadlineMisses != 0 || st.Frames != 4000 ||
				st.OutOfStream != uint64(len(tc.foreign.Frames)) || len(sink.events) != 1 {
				t.Fatalf("stats %+v, %d events: want %d out-of-stream frames (%d held), every real frame accepted, no restart", st,
					len(sink.events), len(tc.foreign.Frames), held)
			}
		})
	}
}

// TestCoreTimedPublisherKeepsDevice: a second publisher interleaved with a
// paced one never takes the device, whatever it sends; once the first is
// silent for ConfirmWait, a jump back is adopted, and a jump forward only
// as far as wall time allows (a publisher close to the device's own
// numbering, within GapSlack, is told apart only by permissions and
// authentication). Protocol.md: "never takes a device from a
// publisher that keeps sending".
func TestCoreTimedPublisherKeepsDevice(t *testing.T) {
	a := synthFrames(5000, 3000)
	want := reference(t, a)
	for _, tc := range []struct {
		name      string
		first     int64
		chunk     int
		pause     int64 // bins between A's last frame and B's first after A stopped
		takesOver bool
	}{
		{"jump back, one frame a message", 10, 1, 0, true},
		{"jump 50 bins ahead of wall time", 5000 + 50, 1, 0, false},
		{"jump to 10^12, 64 frames a message", 1_000_000_000_000, 64, 0, false},
		{"resumes 500 bins later, numbered by time", 5000 + 500, 1, 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, sink := newCore(t, []int{1, 2, 3}, timedCfg())
			t0 := time.Unix(1000, 0)
			for i := range int64(3000) {
				core.FramesAt(one(a, a.FirstSeq+i), 0, arrival(t0, i))
				if i%int64(tc.chunk) == 0 && tc.pause == 0 {
					core.FramesAt(synthFrames(tc.first+i, tc.chunk), 0, arrival(t0, i).Add(period/2))
				}
			}
			st := core.Stats()
			if !sameDecisions(sink.got, want) || st.Restarts != 0 || st.Stale != 0 || st.Frames != 3000 {
				t.Fatalf("stats %+v: the paced stream lost frames or decisions to the second publisher", st)
			}
			// A stops; B goes on paced (one message per chunk of bins).
			tb := arrival(t0, 3000+tc.pause)
			b := tc.first + 3000
			for i := int64(0); i < 300; i += int64(tc.chunk) {
				core.FramesAt(synthFrames(b+i, tc.chunk), 0, tb.Add(time.Duration(i)*period))
			}
			st = core.Stats()
			if got := st.Restarts+boolU(st.GapBins > 0) > 0; got != tc.takesOver {
				t.Fatalf("stats %+v, first %d: took over %v, want %v", st, core.First(), got, tc.takesOver)
			}
			if !tc.takesOver && (core.LastSeq() != a.LastSeq() || len(sink.events) != 1) {
				t.Fatalf("last seq %d, %d events: the stream moved to a numbering wall time does not allow", core.LastSeq(), len(sink.events))
			}
		})
	}
}

func boolU(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestCoreTimedGapWithinWallTime: a paced device whose message was lost
// (its next frame is as far ahead as the time that passed) continues at
// once with the gap filled, and a gap beyond wall time is not believed
// until it is confirmed.
func TestCoreTimedGapWithinWallTime(t *testing.T) {
	f := synthFrames(0, 2000)
	core, _ := newCore(t, []int{1, 2, 3}, timedCfg())
	t0 := time.Unix(1000, 0)
	for s := int64(0); s < 2000; s++ {
		if s >= 1500 && s < 1520 {
			continue // a lost message of 20 frames
		}
		core.FramesAt(one(f, s), 0, arrival(t0, s))
	}
	st := core.Stats()
	if st.GapBins != 20 || st.OutOfStream != 0 || st.Restarts != 0 || st.Frames != 1980 || core.Epoch() != 1 {
		t.Fatalf("stats %+v: want the 20 lost bins filled at once, every frame accepted", st)
	}
}

// TestCoreTickAdoptsAfterSilence: frames of a jump sent as fast as possible
// (no wall time covers it) wait; once the device is silent for ConfirmWait,
// Tick adopts them, so a device that stops right after a jump still gets
// its last frames processed. Tick before then changes nothing.
func TestCoreTickAdoptsAfterSilence(t *testing.T) {
	f := synthFrames(0, 2000)
	core, _ := newCore(t, []int{1, 2, 3}, timedCfg())
	t0 := time.Unix(1000, 0)
	core.FramesAt(&stream.Frames{FirstSeq: 0, Frames: f.Frames[:1500]}, 0, t0)
	core.FramesAt(&stream.Frames{FirstSeq: 1600, Frames: f.Frames[1600:1620]}, 0, t0) // 100 bins lost, no time passed
	if core.LastSeq() != 1499 || core.Held() != DefaultConfirmFrames {
		t.Fatalf("last %d, %d held: want the jump held", core.LastSeq(), core.Held())
	}
	core.Tick(t0.Add(DefaultConfirmWait / 2))
	if core.LastSeq() != 1499 {
		t.Fatalf("last %d: adopted before ConfirmWait", core.LastSeq())
	}
	core.Tick(t0.Add(DefaultConfirmWait))
	st := core.Stats()
	if core.LastSeq() != 1619 || core.Held() != 0 || st.Restarts != 0 || core.Epoch() != 1 || st.GapBins != 104 || st.OutOfStream != 4 {
		t.Fatalf("last %d, %d held, stats %+v: want the jump adopted as a gap of the stream (the 4 oldest held frames dropped)",
			core.LastSeq(), core.Held(), st)
	}
}
