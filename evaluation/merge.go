package evaluation

import (
	"encoding/json"
	"fmt"
	"os"
)

// ReadReport reads a Report as `trainer eval --json` writes it.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	if len(r.Models) == 0 {
		return nil, fmt.Errorf("read report %s: no models", path)
	}
	return &r, nil
}

// SeedSet is one model gathered from several reports, one per training
// seed (Seeds).
type SeedSet struct {
	// Name is the model's name, with " (xN)" for N seeds, as trainer eval
	// names repeats.
	Name string
	// Scoring is the first report's.
	Scoring Scoring
	// Cells are the seed-averaged per-cell scores; Seeds each seed's own
	// (nil for one report).
	Cells []CellScores
	Seeds [][]CellScores
	// Repeats are every report's repeats of the model (one per report
	// unless a report averaged several), with their time blocks if kept.
	Repeats [][]CellScores
}

// MergeBlocks merges every k consecutive time blocks of the set's scores
// into one (MergeBlocks), for a block bootstrap with k times longer
// blocks.
func (s *SeedSet) MergeBlocks(k int) {
	if k <= 1 {
		return
	}
	for i, r := range s.Repeats {
		s.Repeats[i] = MergeBlocks(r, k)
	}
	s.Scoring.BlockBins *= k
}

// sameScoring reports whether two scorings differ at most in their spike
// policy (each model or seed may use thresholds of its own).
func sameScoring(a, b Scoring) bool {
	a.Policy = b.Policy
	return a == b
}

// Seeds gathers one model from each of several reports, one report per
// training seed, e.g. each seed scored with spike thresholds of its own.
// names holds one name for every report (none: each report's only model)
// or one per report, for seeds whose models are named apart. The reports
// must agree on what was scored and how, except the spike policy.
func Seeds(reps []*Report, names ...string) (*SeedSet, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("no reports")
	}
	if len(names) > 1 && len(names) != len(reps) {
		return nil, fmt.Errorf("%d model names for %d reports: give one, or one per report", len(names), len(reps))
	}
	set := &SeedSet{Scoring: reps[0].Scoring}
	for i, r := range reps {
		var name string
		if len(names) > 0 {
			name = names[min(i, len(names)-1)]
		}
		m, err := r.pick(name)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", i+1, err)
		}
		if !sameScoring(r.Scoring, set.Scoring) {
			return nil, fmt.Errorf("report %d was scored otherwise than report 1 (%+v, not %+v)", i+1, r.Scoring, set.Scoring)
		}
		set.Seeds = append(set.Seeds, m.Cells)
		set.Repeats = append(set.Repeats, m.repeats()...)
		if i == 0 {
			set.Name = m.Name // named after the first, as trainer eval names repeats
		}
	}
	set.Cells = AverageRepeats(set.Seeds)
	set.Name = repeatsName(set.Name, len(reps))
	if len(set.Seeds) == 1 {
		set.Seeds = nil
	}
	return set, nil
}

// CompareSets is CompareSeeds of A - B for two sets scored alike except
// in their spike policies, with the time-block x cell interval (AddBlocks)
// when they were scored in time blocks.
func CompareSets(a, b *SeedSet, resamples int, seed uint64) (*Comparison, error) {
	if !sameScoring(a.Scoring, b.Scoring) {
		return nil, fmt.Errorf("%s and %s were scored otherwise: %+v and %+v", a.Name, b.Name, a.Scoring, b.Scoring)
	}
	c, err := CompareSeeds(a.Name+" - "+b.Name, a.Name, b.Name, a.Cells, b.Cells, a.Seeds, b.Seeds, resamples, seed)
	if err != nil || a.Scoring.BlockBins == 0 {
		return c, err
	}
	if err := c.AddBlocks(a.Repeats, b.Repeats, a.Scoring.BlockSeconds(), resamples, seed); err != nil {
		return nil, fmt.Errorf("comparison %s: %w", c.Name, err)
	}
	return c, nil
}

// pick returns the model called name, or the only model when name is
// empty.
func (r *Report) pick(name string) (*ModelResult, error) {
	if name == "" {
		if len(r.Models) != 1 {
			return nil, fmt.Errorf("%d models (%s): name one", len(r.Models), r.ModelNames())
		}
		return &r.Models[0], nil
	}
	if m := r.Model(name); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no model %q (%s)", name, r.ModelNames())
}
