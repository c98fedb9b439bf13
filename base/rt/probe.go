package rt

import (
	"fmt"
	"time"
)

// ProbeResult is what Probe measured.
type ProbeResult struct {
	// Overshoots holds each wake-up's delay past its deadline.
	Overshoots []time.Duration
	// FIFO reports whether the probe's thread ran at SCHED_FIFO (false:
	// at normal priority, the privilege lacking).
	FIFO bool
}

// errProbeSpan rejects a probe's interval and duration.
func errProbeSpan(interval, d time.Duration) error {
	return fmt.Errorf("rt: probe every %v for %v: want an interval > 0 within the duration", interval, d)
}
