package evaluation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"rgcpred/rgc"
	"rgcpred/rollout"
)

// Config is an evaluation: models scored with the same Options, and the
// paired comparisons to make between them.
type Config struct {
	Options
	// SigmaMs is the smoothing time scale of the spike-train metrics; it
	// builds Options.Metrics when that is nil.
	SigmaMs float64
	// Models are the models to score, in report order.
	Models []ModelSpec
	// Compare lists paired comparisons "A:B" (A - B per cell) of two of
	// the models, by name.
	Compare []string
}

// NewScoring describes an evaluation with c's settings: the recording and
// split, the compared rollout bins (limited by MaxBins), the smoothing, the
// bootstrap and the rollout's start rule and spike policy.
func NewScoring(c *Config) (Scoring, error) {
	_, from, to, err := rollout.Bins(c.Rec, c.Split)
	if err != nil {
		return Scoring{}, err
	}
	if c.MaxBins > 0 {
		to = min(to, from+c.MaxBins)
	}
	policy := c.Policy
	if policy == nil {
		policy = rollout.Median{}
	}
	s := Scoring{Recording: c.Rec.Name, Split: c.Split.String(), Bins: [2]int{from, to},
		SigmaMs: c.SigmaMs, BinMs: rgc.BinMs, Resamples: c.Resamples, Seed: c.Seed, Stagger: c.Stagger, Policy: policy.String(),
		BlockBins: max(c.BlockBins, 0)}
	if c.Metrics != nil {
		s.TauBins = c.Metrics.TauBins()
	}
	return s, nil
}

// Evaluate scores every model of c (EvaluateModel), then makes the paired
// comparisons, and returns the report. Progress lines, and a line saying
// what is scored, go to c.Progress.
func Evaluate(ctx context.Context, c Config) (*Report, error) {
	if c.Rec == nil || len(c.Cells) == 0 {
		return nil, errors.New("evaluate: no recording or no cells")
	}
	if len(c.Models) == 0 {
		return nil, errors.New("evaluate: no models")
	}
	if c.Batch < 1 {
		return nil, fmt.Errorf("evaluate: batch %d: want at least 1", c.Batch)
	}
	if c.Resamples < rollout.DefaultResamples {
		return nil, fmt.Errorf("evaluate: %d resamples: want at least %d", c.Resamples, rollout.DefaultResamples)
	}
	if c.Metrics == nil {
		m, err := rollout.NewMetrics(c.SigmaMs, rgc.BinMs)
		if err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		c.Metrics = m
	}
	if c.Policy == nil {
		c.Policy = rollout.Median{}
	}
	ids := make([]int, len(c.Cells))
	for i, ci := range c.Cells {
		ids[i] = c.Rec.Cells[ci].ClusterID
	}
	if err := rollout.CheckPolicy(c.Policy, ids); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if th, ok := c.Policy.(*rollout.Threshold); ok {
		if err := th.CheckSplit(c.Split); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
		c.Models, c.Compare = withZero(c.Models, c.Compare, ZeroSpec(c.Rec, c.Cells, false))
	}
	if c.Keep != nil {
		for _, id := range c.Keep.ClusterIDs {
			if !slices.Contains(ids, id) {
				return nil, fmt.Errorf("evaluate: raster cell %d is not one of the evaluated cells", id)
			}
		}
	}
	sc, err := NewScoring(&c)
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	r := &Report{Scoring: sc}
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "eval: %s, split %s, %d cells, rollout bins [%d, %d) (%.1f s), stagger %v, policy %s\n",
			sc.Recording, sc.Split, len(c.Cells), sc.Bins[0], sc.Bins[1], float64(sc.Bins[1]-sc.Bins[0])/rgc.BinRateHz, sc.Stagger, sc.Policy)
	}
	for _, sp := range c.Models {
		o := c.Options
		silent := silentBaseline(sp, c.Policy)
		if silent {
			o.Policy = rollout.Median{}
		}
		m, err := EvaluateModel(ctx, sp, o)
		if err != nil {
			return nil, fmt.Errorf("evaluate %s: %w", sp.Name, err)
		}
		if silent {
			m.Policy = o.Policy.String()
		}
		r.Models = append(r.Models, *m)
	}
	for _, pair := range c.Compare {
		a, b, ok := strings.Cut(pair, ":")
		ma, mb := r.Model(a), r.Model(b)
		if !ok || ma == nil || mb == nil {
			return nil, fmt.Errorf("compare %q: want A:B, two of the evaluated models (%s)", pair, r.ModelNames())
		}
		cmp, err := CompareSeeds(a+" - "+b, a, b, ma.Cells, mb.Cells, ma.Repeats, mb.Repeats, c.Resamples, c.Seed)
		if err != nil {
			return nil, err
		}
		if c.BlockBins > 0 {
			if err := cmp.AddBlocks(ma.repeats(), mb.repeats(), sc.BlockSeconds(), c.Resamples, c.Seed); err != nil {
				return nil, fmt.Errorf("comparison %s: %w", cmp.Name, err)
			}
		}
		r.Comparisons = append(r.Comparisons, *cmp)
	}
	return r, nil
}

// silentBaseline reports whether sp is a zero-input baseline under a
// threshold policy: thresholds fitted for another model mean nothing for a
// constant prediction, so it rolls out by the median rule, which leaves it
// silent, the reference every threshold table shows.
func silentBaseline(sp ModelSpec, p rollout.Policy) bool {
	_, th := p.(*rollout.Threshold)
	return th && (sp.Kind == "zero" || sp.Kind == "zero-pooled")
}

// withZero adds to models the zero-input baseline zero unless a model is
// already called "zero", and to the comparisons A:zero and B:zero for every
// pair A:B, so that the table shows silence beside both models compared.
func withZero(models []ModelSpec, compare []string, zero ModelSpec) ([]ModelSpec, []string) {
	if !slices.ContainsFunc(models, func(m ModelSpec) bool { return m.Name == zero.Name }) {
		models = append([]ModelSpec{zero}, models...)
	}
	out := slices.Clone(compare)
	for _, pair := range compare {
		a, b, ok := strings.Cut(pair, ":")
		if !ok {
			continue
		}
		for _, m := range []string{a, b} {
			if z := m + ":" + zero.Name; m != zero.Name && !slices.Contains(out, z) {
				out = append(out, z)
			}
		}
	}
	return models, out
}
