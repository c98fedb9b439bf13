package replay

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"rgcpred/rgc"
)

// fakeClock is a Clock whose time only moves when the code under test sleeps
// or works: every sleep overshoots its deadline by a random delay in
// [0, maxOversleep), and every send costs work.
type fakeClock struct {
	now          time.Time
	rng          *rand.Rand
	maxOversleep time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.After(c.now) {
		c.now = t
	}
	if c.maxOversleep > 0 {
		c.now = c.now.Add(time.Duration(c.rng.Int64N(int64(c.maxOversleep))))
	}
	return nil
}

// naiveRun is the drifting pacer the Pacer replaces: it sleeps one frame
// period after each send, relative to the time it woke. The test uses it to
// show that the fake clock exposes drift.
func naiveRun(c *fakeClock, n int64, work time.Duration, sent func(i int64, at time.Time)) {
	rate := rgc.BinRateHz
	period := time.Duration(1e9 / rate)
	for i := int64(0); i < n; i++ {
		sent(i, c.now)
		c.now = c.now.Add(work)
		_ = c.SleepUntil(context.Background(), c.now.Add(period-work))
	}
}

func TestPacerNoDrift(t *testing.T) {
	const n = 900_000 // 15 minutes at 992 Hz
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		speed     float64
		oversleep time.Duration
		work      time.Duration
		maxBatch  int
	}{
		{"exact clock", 1, 0, 0, 8},
		{"jittery wake-ups", 1, 700 * time.Microsecond, 20 * time.Microsecond, 8},
		{"wake-ups later than a bin", 1, 3 * time.Millisecond, 50 * time.Microsecond, 16},
		{"speed 4", 4, 100 * time.Microsecond, 10 * time.Microsecond, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: start, rng: rand.New(rand.NewPCG(1, 2)), maxOversleep: tc.oversleep}
			p, err := NewPacer(clk, start, tc.speed)
			if err != nil {
				t.Fatal(err)
			}
			next := int64(0)
			var worst time.Duration
			st, err := p.Run(context.Background(), 0, n, tc.maxBatch, func(lo, hi int64, now time.Time) error {
				if lo != next {
					t.Fatalf("send %d..%d, want to start at %d", lo, hi, next)
				}
				for i := lo; i < hi; i++ {
					due := p.Due(i)
					if now.Before(due) {
						t.Fatalf("frame %d sent %v before its deadline", i, due.Sub(now))
					}
					worst = max(worst, now.Sub(due))
				}
				next = hi
				clk.now = clk.now.Add(tc.work)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if st.Frames != n || next != n {
				t.Fatalf("sent %d frames (next %d), want %d", st.Frames, next, n)
			}
			// The lag of any frame, including the last one after 15 minutes,
			// stays within one wake-up's oversleep plus one send's work.
			bound := tc.oversleep + tc.work
			if worst > bound || st.MaxLag > bound {
				t.Fatalf("worst lag %v (stats %v), want <= %v", worst, st.MaxLag, bound)
			}
			// The schedule itself: frame n-1 is due (n-1)/rate after the start,
			// to the nanosecond.
			want := float64(n-1) / (rgc.BinRateHz * tc.speed) * 1e9
			if got := float64(p.Due(n - 1).Sub(start)); got < want-1 || got > want+1 {
				t.Fatalf("Due(%d) = %v after start, want %.0f ns", n-1, got, want)
			}
		})
	}
}

// TestNaivePacerDrifts checks that the fake clock catches the drift of a
// relative-sleep pacer, so TestPacerNoDrift would fail on one.
func TestNaivePacerDrifts(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{now: start, rng: rand.New(rand.NewPCG(1, 2)), maxOversleep: 100 * time.Microsecond}
	p, _ := NewPacer(clk, start, 1)
	var last time.Duration
	naiveRun(clk, 10_000, 20*time.Microsecond, func(i int64, at time.Time) { last = at.Sub(p.Due(i)) })
	// Mean oversleep 50 µs per frame accumulates to about 0.5 s over 10,000
	// frames; the absolute pacer stays within 120 µs.
	if last < 100*time.Millisecond {
		t.Fatalf("naive pacer drifted only %v over 10,000 frames; the fake clock does not expose drift", last)
	}
}

func TestPacerIndex(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, speed := range []float64{1, 3.7, 0.25} {
		p, _ := NewPacer(SystemClock{}, start, speed)
		for _, i := range []int64{-5, -1, 0, 1, 991, 992, 123457, 900_001} {
			d := p.Due(i)
			if got := p.Index(d); got != i {
				t.Errorf("speed %v: Index(Due(%d)) = %d", speed, i, got)
			}
			if got := p.Index(d.Add(-time.Nanosecond)); got != i-1 {
				t.Errorf("speed %v: Index(Due(%d)-1ns) = %d, want %d", speed, i, got, i-1)
			}
		}
	}
}

func TestNewPacerRejectsBadSpeed(t *testing.T) {
	for _, s := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := NewPacer(SystemClock{}, time.Now(), s); err == nil {
			t.Errorf("speed %v accepted", s)
		}
	}
	if _, err := NewPacer(nil, time.Now(), 1); err == nil {
		t.Error("nil clock accepted")
	}
}

func TestPacerRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := &fakeClock{now: time.Unix(0, 0), rng: rand.New(rand.NewPCG(3, 4))}
	p, _ := NewPacer(clk, clk.now, 1)
	sent := int64(0)
	_, err := p.Run(ctx, 0, 1000, 4, func(lo, hi int64, _ time.Time) error {
		sent = hi
		if hi >= 10 {
			cancel()
		}
		return nil
	})
	if err != context.Canceled {
		t.Fatalf("Run after cancel: %v, want context.Canceled", err)
	}
	if sent != 10 {
		t.Fatalf("sent up to %d after cancel at 10", sent)
	}
}

// TestSystemClockPrecision checks the real clock's sleep lands at or after
// its deadline (never early); its lateness is reported, not asserted, since
// the machine is shared.
func TestSystemClockPrecision(t *testing.T) {
	undo := PrepareThread()
	defer undo()
	c := SystemClock{}
	var worst time.Duration
	for range 50 {
		due := time.Now().Add(300 * time.Microsecond)
		if err := c.SleepUntil(context.Background(), due); err != nil {
			t.Fatal(err)
		}
		late := time.Since(due)
		if late < 0 {
			t.Fatalf("woke %v early", -late)
		}
		worst = max(worst, late)
	}
	t.Logf("worst oversleep of 50 sleeps: %v", worst)
}
