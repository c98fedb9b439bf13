package rollout

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Summaries over cells (docs/model.md section 5): the
// interquartile mean with a percentile-bootstrap confidence interval
// (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).

// DefaultResamples is the default number of bootstrap resamples.
const DefaultResamples = 2000

// IQM returns the interquartile mean of x: sort, drop floor(n/4) values at
// each end, average the rest (scipy.stats.trim_mean(x, 0.25)). With fewer
// than 4 values nothing is dropped. It returns NaN for no values.
func IQM(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return iqmSorted(s)
}

func iqmSorted(s []float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	cut := len(s) / 4
	var sum float64
	for _, v := range s[cut : len(s)-cut] {
		sum += v
	}
	return sum / float64(len(s)-2*cut)
}

// Summary is an interquartile mean over cells with its confidence interval.
type Summary struct {
	// IQM is the interquartile mean over cells.
	IQM float64 `json:"iqm"`
	// Lo and Hi bound the 95% percentile-bootstrap confidence interval.
	Lo float64 `json:"ci_lo"`
	Hi float64 `json:"ci_hi"`
	// N is the number of cells.
	N int `json:"n"`
}

// Bootstrap summarises per-cell values x: the IQM and a 95% percentile
// bootstrap interval from resamples resamples of the cells with replacement
// (PCG seeded with seed, so the interval is reproducible). The interval ends
// are gonum's Empirical 2.5% and 97.5% quantiles of the resampled IQMs. It
// fails for no values, a non-finite value or fewer than 2000 resamples.
func Bootstrap(x []float64, resamples int, seed uint64) (Summary, error) {
	if len(x) == 0 {
		return Summary{}, errors.New("bootstrap: no values")
	}
	if resamples < DefaultResamples {
		return Summary{}, fmt.Errorf("bootstrap: %d resamples, want at least %d", resamples, DefaultResamples)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Summary{}, fmt.Errorf("bootstrap: value %d is %v", i, v)
		}
	}
	rng := newRand(seed)
	n := len(x)
	sample := make([]float64, n)
	iqms := make([]float64, resamples)
	for r := range iqms {
		for i := range sample {
			sample[i] = x[rng.IntN(n)]
		}
		slices.Sort(sample)
		iqms[r] = iqmSorted(sample)
	}
	lo, hi := quantiles(iqms)
	return Summary{IQM: IQM(x), Lo: lo, Hi: hi, N: n}, nil
}

// newRand is the bootstraps' generator: PCG seeded with seed.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// quantiles sorts the resampled statistics and returns gonum's Empirical
// 2.5% and 97.5% quantiles of them, the 95% percentile interval.
func quantiles(stats []float64) (lo, hi float64) {
	slices.Sort(stats)
	return stat.Quantile(0.025, stat.Empirical, stats, nil), stat.Quantile(0.975, stat.Empirical, stats, nil)
}
