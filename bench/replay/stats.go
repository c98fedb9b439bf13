package replay

import (
	"math"
	"slices"
	"time"
)

// Durations collects duration samples (latencies, lateness) and summarises
// them by percentiles. The zero value is ready to use.
type Durations struct {
	samples []time.Duration
}

// Add records one sample.
func (d *Durations) Add(x time.Duration) { d.samples = append(d.samples, x) }

// Merge adds every sample of o.
func (d *Durations) Merge(o *Durations) { d.samples = append(d.samples, o.samples...) }

// Len returns the number of samples.
func (d *Durations) Len() int { return len(d.samples) }

// DurationSummary is a percentile summary of duration samples, in
// milliseconds.
type DurationSummary struct {
	// N is the number of samples; the others are their mean, median,
	// 99th and 99.9th percentiles and maximum.
	N      int     `json:"n"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Over returns the share of the samples above bound (0 without samples).
func (d *Durations) Over(bound time.Duration) float64 {
	if len(d.samples) == 0 {
		return 0
	}
	n := 0
	for _, x := range d.samples {
		if x > bound {
			n++
		}
	}
	return float64(n) / float64(len(d.samples))
}

// Summary returns the mean and the nearest-rank percentiles (the smallest
// sample with at least q of the samples at or below it) of the samples; all
// zero without samples.
func (d *Durations) Summary() DurationSummary {
	n := len(d.samples)
	if n == 0 {
		return DurationSummary{}
	}
	s := slices.Clone(d.samples)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += ms(x)
	}
	return DurationSummary{
		N:      n,
		MeanMs: sum / float64(n),
		P50Ms:  ms(nearestRank(s, 0.50)),
		P99Ms:  ms(nearestRank(s, 0.99)),
		P999Ms: ms(nearestRank(s, 0.999)),
		MaxMs:  ms(s[n-1]),
	}
}

// nearestRank returns the q-quantile of sorted by the nearest-rank rule.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// LateTracker does the late-spike accounting of a paced replay: a predicted
// spike is late when it arrives after its bin was due on the replay clock,
// that is after the pacer's deadline for the frame of that bin (the moment
// the device would have had to emit it).
type LateTracker struct {
	pacer    *Pacer
	spikes   int64
	late     int64
	lateness Durations
}

// NewLateTracker returns a tracker against pacer's deadlines; with a nil
// pacer (an unpaced replay) no spike is ever late.
func NewLateTracker(pacer *Pacer) *LateTracker { return &LateTracker{pacer: pacer} }

// Spike accounts for a predicted spike in frame frame (the pacer's frame
// index) that arrived at arrived, and reports whether it was late and by how
// much.
func (t *LateTracker) Spike(frame int64, arrived time.Time) (late bool, by time.Duration) {
	t.spikes++
	if t.pacer == nil {
		return false, 0
	}
	by = arrived.Sub(t.pacer.Due(frame))
	if by <= 0 {
		return false, 0
	}
	t.late++
	t.lateness.Add(by)
	return true, by
}

// LateSummary is the late-spike account of a replay.
type LateSummary struct {
	// Spikes is the number of predicted spikes seen; Late how many of them
	// arrived after their bin was due.
	Spikes int64 `json:"spikes"`
	Late   int64 `json:"late"`
	// Paced is false for an unpaced (as fast as possible) replay, where
	// lateness is not defined.
	Paced bool `json:"paced"`
	// Lateness summarises by how much the late spikes were late.
	Lateness DurationSummary `json:"lateness"`
}

// Lateness returns the lateness samples of the late spikes.
func (t *LateTracker) Lateness() *Durations { return &t.lateness }

// Summary returns the account so far.
func (t *LateTracker) Summary() LateSummary {
	return LateSummary{Spikes: t.spikes, Late: t.late, Paced: t.pacer != nil, Lateness: t.lateness.Summary()}
}
