// Package replay is the device side of the real-time predictor: it plays a
// recording's stimulus to predictord frame by frame, paced against the wall
// clock (or as fast as the daemon takes it), collects the predicted spikes,
// accounts for late ones and writes the predicted spike trains.
//
// The pieces here are independent of the wire format: a drift-free Pacer
// over a Clock, LateTracker for the late-spike accounting, and the spike-
// train writers. The NATS side lives in session.go and uses the stream
// package's device client.
package replay

import (
	"context"
	"time"
)

// Clock is the time source of a Pacer. SystemClock is the real one; tests use
// a fake clock to check pacing without waiting.
type Clock interface {
	// Now returns the current time (with a monotonic reading for the real
	// clock).
	Now() time.Time
	// SleepUntil blocks until t has passed or ctx is done, returning ctx's
	// error in the latter case. It returns at once when t is not in the
	// future.
	SleepUntil(ctx context.Context, t time.Time) error
}

// SystemClock is the wall clock. On Linux it sleeps with nanosleep(2) on a
// locked OS thread with a 1 µs timer slack, because the Go runtime's timers
// wake about half a millisecond late on average (they are serviced by an
// epoll wait with millisecond resolution), which is half a bin at 992 Hz.
// Elsewhere it falls back to time.Sleep.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// maxSleepChunk bounds a single sleep so that cancellation is noticed
// promptly even when the next deadline is far away (slow --speed).
const maxSleepChunk = 20 * time.Millisecond

// SleepUntil sleeps until t, in chunks of at most maxSleepChunk so that ctx
// is checked regularly. The calling goroutine should be locked to its OS
// thread (see PrepareThread) for the fine-grained sleep to be effective.
func (SystemClock) SleepUntil(ctx context.Context, t time.Time) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		d := time.Until(t)
		if d <= 0 {
			return nil
		}
		if d > maxSleepChunk {
			d = maxSleepChunk
		}
		preciseSleep(d)
	}
}
