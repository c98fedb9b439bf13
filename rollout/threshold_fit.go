package rollout

import (
	"context"
	"fmt"
	"math"

	"rgcpred/rgc"
)

// logit and its inverse map thresholds to an unbounded scale for bisection.
func logit(p float64) float64 { return math.Log(p / (1 - p)) }
func expit(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Defaults of FitOptions.
const (
	// DefaultFitIterations is the number of bisection steps every cell
	// takes: each halves the cell's bracket of logit(threshold), which
	// starts at [-9.2, 9.2] (1e-4 to 0.9999).
	DefaultFitIterations = 10
	// DefaultFitMaxIterations bounds the steps of a cell whose count is not
	// yet within the tolerance: 40 halvings narrow the bracket to 2e-11 in
	// logit, where a count that still jumps past the recorded one is
	// discontinuous in the threshold.
	DefaultFitMaxIterations = 40
	// DefaultFitTolerance is the relative tolerance of a match: the
	// generated count within 5% of the recorded one (or within a Poisson
	// standard error, FitOptions.Tolerance).
	DefaultFitTolerance = 0.05
	// minBracket is the logit bracket below which a cell's search stops:
	// the count jumps across the recorded one within it.
	minBracket = 1e-9
)

// FitOptions configure FitThresholds.
type FitOptions struct {
	// Split is the stretch fitted on; it should not be the split the
	// thresholds are scored on (normally rgc.Val).
	Split rgc.Split
	// Cells are the cells to fit, as indices into the recording's Cells.
	Cells []int
	// MaxBins, if positive, limits every rollout to that many bins after
	// the split's first window.
	MaxBins int
	// MaxBatch is the largest number of windows per Predict call (0: one
	// call per round of all cells).
	MaxBatch int
	// Iterations is the number of bisection steps of every cell
	// (default DefaultFitIterations).
	Iterations int
	// MaxIterations bounds the steps of a cell that is not within
	// Tolerance after Iterations (default DefaultFitMaxIterations; at
	// least Iterations).
	MaxIterations int
	// Tolerance is the relative tolerance of a match: a count within
	// Tolerance x recorded spikes of the recorded one, or within
	// sqrt(recorded) (a Poisson standard error) or 1 if more (default
	// DefaultFitTolerance).
	Tolerance float64
}

// withDefaults returns o with its zero fields set to the defaults.
func (o FitOptions) withDefaults() FitOptions {
	if o.Iterations <= 0 {
		o.Iterations = DefaultFitIterations
	}
	if o.MaxIterations <= 0 {
		o.MaxIterations = DefaultFitMaxIterations
	}
	o.MaxIterations = max(o.MaxIterations, o.Iterations)
	if o.Tolerance <= 0 {
		o.Tolerance = DefaultFitTolerance
	}
	return o
}

// matches reports whether gen spikes are within tol x recd, or one
// Poisson standard error sqrt(recd), of recd, at least one spike.
func matches(gen, recd int, tol float64) bool {
	r := float64(recd)
	return float64(abs(gen-recd)) <= max(1, tol*r, math.Sqrt(r))
}

// fitCell is the state of one cell's search.
type fitCell struct {
	lo, hi float64 // bracket of logit(threshold): lo fired too often, hi not
	best   ThresholdCell
	steps  int
}

// FitThresholds chooses, for every cell of opts.Cells, the threshold at
// which the autoregressive rollout over opts' stretch generates as many
// spikes as were recorded there (after each cell's first window). Each
// cell's threshold is bisected on the logit scale, keeping the bracket
// whose lower end fired too often and whose upper end did not (a higher
// threshold fires less often); every step is one rollout of the cells
// still searching. A cell stops after opts.Iterations steps once its count
// is within opts.Tolerance, or after opts.MaxIterations, or when its
// bracket is narrower than 1e-9: then its count jumps across the recorded
// one (a rollout that flips from silence to runaway firing) and no
// threshold matches. Since a rollout's count is a noisy function of the
// threshold, each cell gets the tried threshold whose count came closest to
// the recorded one (the latest of equals); ThresholdCell.Matched, Over and Under say how close the
// search came. It returns one entry per cell, in the order of opts.Cells.
func FitThresholds(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, opts FitOptions) ([]ThresholdCell, error) {
	opts = opts.withDefaults()
	n := len(opts.Cells)
	if n == 0 {
		return nil, fmt.Errorf("rollout: fit thresholds: no cells")
	}
	st := make([]fitCell, n)
	for i := range st {
		st[i].lo, st[i].hi = logit(1e-4), logit(1-1e-4)
	}
	th := &Threshold{Thresholds: make(map[int]float64, n), Source: "fit"}
	ro := Options{Split: opts.Split, MaxBins: opts.MaxBins, MaxBatch: opts.MaxBatch, Policy: th}
	pos := make([]int, 0, n) // positions in opts.Cells of the cells still searching
	for it := 0; ; it++ {
		pos, ro.Cells = pos[:0], ro.Cells[:0]
		for i, c := range opts.Cells {
			if s := &st[i]; s.searching(it, opts) {
				pos = append(pos, i)
				ro.Cells = append(ro.Cells, c)
				th.Thresholds[rec.Cells[c].ClusterID] = expit((s.lo + s.hi) / 2)
			}
		}
		if len(pos) == 0 {
			break
		}
		res, err := Run(ctx, rec, p, ro)
		if err != nil {
			return nil, fmt.Errorf("rollout: fit thresholds, iteration %d: %w", it+1, err)
		}
		for k, tr := range res.Trains {
			gen, recd := counts(res.From, tr)
			st[pos[k]].step(ThresholdCell{ID: tr.ClusterID, Threshold: th.Thresholds[tr.ClusterID], Recorded: recd, Generated: gen})
		}
	}
	out := make([]ThresholdCell, n)
	for i := range st {
		out[i] = st[i].best
		out[i].Matched = matches(out[i].Generated, out[i].Recorded, opts.Tolerance)
	}
	return out, nil
}

// counts returns the generated and recorded spikes of a train after its
// first window (bins with several recorded spikes count once).
func counts(from int, tr Train) (gen, recd int) {
	for j := range tr.Generated {
		if from+j > tr.Start {
			gen += int(tr.Generated[j])
			recd += int(min(tr.Recorded[j], 1))
		}
	}
	return gen, recd
}

// searching reports whether the cell takes step it.
func (s *fitCell) searching(it int, o FitOptions) bool {
	switch {
	case it < o.Iterations:
		return true
	case it >= o.MaxIterations:
		return false
	case matches(s.best.Generated, s.best.Recorded, o.Tolerance):
		return false
	}
	return s.hi-s.lo >= minBracket
}

// step records one tried threshold and halves the bracket.
func (s *fitCell) step(cur ThresholdCell) {
	recd := cur.Recorded
	// Ties go to the later, more refined, threshold.
	if s.steps == 0 || abs(cur.Generated-recd) <= abs(s.best.Generated-recd) {
		over, under := s.best.Over, s.best.Under
		s.best = cur
		s.best.Over, s.best.Under = over, under
	}
	s.steps++
	t := Trial{Threshold: cur.Threshold, Generated: cur.Generated}
	if x := logit(cur.Threshold); cur.Generated > recd {
		s.lo = x // fires too often: raise the threshold
		s.best.Over = &t
	} else {
		s.hi = x
		s.best.Under = &t
	}
}

func abs(x int) int { return max(x, -x) }
