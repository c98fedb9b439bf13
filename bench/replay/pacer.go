package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"rgcpred/rgc"
)

// Pacer schedules frames against a Clock with absolute deadlines: frame i is
// due at Start + i / (rgc.BinRateHz * Speed) seconds, computed from i alone,
// so a late wake-up delays only the frames already due and never shifts the
// later ones (no cumulative drift, however long the recording).
type Pacer struct {
	clock Clock
	start time.Time
	// nsPerFrame is the wall-clock length of one frame in nanoseconds.
	nsPerFrame float64
	speed      float64
}

// NewPacer returns a pacer whose frame 0 is due at start. speed scales the
// replay clock: 1 is real time (991.82 frames per second), 2 twice as fast.
func NewPacer(c Clock, start time.Time, speed float64) (*Pacer, error) {
	if c == nil {
		return nil, errors.New("pacer: nil clock")
	}
	if !(speed > 0) || math.IsInf(speed, 0) {
		return nil, fmt.Errorf("pacer: speed %v must be a positive finite number", speed)
	}
	return &Pacer{clock: c, start: start, nsPerFrame: 1e9 / (rgc.BinRateHz * speed), speed: speed}, nil
}

// Start returns the time at which frame 0 is due.
func (p *Pacer) Start() time.Time { return p.start }

// Speed returns the pacer's speed factor.
func (p *Pacer) Speed() float64 { return p.speed }

// Due returns the deadline of frame i (which may be negative: frames before
// the start).
func (p *Pacer) Due(i int64) time.Time {
	return p.start.Add(time.Duration(math.Round(float64(i) * p.nsPerFrame)))
}

// Index returns the last frame due at or before t (-1 when t is before the
// start, lower still further back).
func (p *Pacer) Index(t time.Time) int64 {
	i := int64(math.Floor(float64(t.Sub(p.start)) / p.nsPerFrame))
	// Settle the rounding of Due at the boundary.
	for p.Due(i+1).Compare(t) <= 0 {
		i++
	}
	for p.Due(i).After(t) {
		i--
	}
	return i
}

// SendFunc publishes frames [lo, hi) at time now (the clock's reading after
// the wake-up that made them due).
type SendFunc func(lo, hi int64, now time.Time) error

// PaceStats summarises a paced run: how late frames left relative to their
// deadlines (the sender's lag, not the daemon's).
type PaceStats struct {
	// Frames is the number of frames sent; Messages the number of send calls.
	Frames, Messages int64
	// MaxLag is the largest delay between a frame's deadline and its send.
	MaxLag time.Duration
	// LagOver1Bin counts frames sent more than one bin after their deadline.
	LagOver1Bin int64
	// SumLag is the sum of the lags of all frames (for the mean).
	SumLag time.Duration
}

// MeanLag returns the mean send lag per frame.
func (s PaceStats) MeanLag() time.Duration {
	if s.Frames == 0 {
		return 0
	}
	return s.SumLag / time.Duration(s.Frames)
}

// Run sends frames [from, to) as they fall due: it sleeps until the next
// frame's deadline, then sends every frame due by the time it woke (at most
// maxBatch per call; a sender that woke late catches up in batches instead of
// falling further behind). It returns when all frames are sent, on the first
// send error, or when ctx is done.
func (p *Pacer) Run(ctx context.Context, from, to int64, maxBatch int, send SendFunc) (PaceStats, error) {
	var st PaceStats
	if maxBatch < 1 {
		return st, fmt.Errorf("pacer: maxBatch %d must be at least 1", maxBatch)
	}
	binDur := time.Duration(p.nsPerFrame)
	for next := from; next < to; {
		if err := p.clock.SleepUntil(ctx, p.Due(next)); err != nil {
			return st, err
		}
		now := p.clock.Now()
		hi := p.Index(now) + 1
		hi = min(hi, to, next+int64(maxBatch))
		if hi <= next { // a clock that woke early: never send ahead of time
			continue
		}
		for i := next; i < hi; i++ {
			lag := now.Sub(p.Due(i))
			st.SumLag += lag
			if lag > st.MaxLag {
				st.MaxLag = lag
			}
			if lag > binDur {
				st.LagOver1Bin++
			}
		}
		if err := send(next, hi, now); err != nil {
			return st, fmt.Errorf("send frames %d..%d: %w", next, hi-1, err)
		}
		st.Frames += hi - next
		st.Messages++
		next = hi
	}
	return st, nil
}
