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

// Seeds gathers one model from each of several reports, one report per
// training seed, e.g. each seed scored with spike thresholds of its own:
// the model called name in each (the only model when name is empty). The
// reports must agree on what was scored and how (Scoring), except the
// spike policy, which may name each seed's own file. It returns the
// seed-averaged per-cell scores, each seed's own (nil for one report) and
// the first report's scoring.
func Seeds(reps []*Report, name string) (avg []CellScores, seeds [][]CellScores, sc Scoring, err error) {
	if len(reps) == 0 {
		return nil, nil, sc, fmt.Errorf("no reports")
	}
	sc = reps[0].Scoring
	for i, r := range reps {
		m, err := r.pick(name)
		if err != nil {
			return nil, nil, sc, fmt.Errorf("report %d: %w", i+1, err)
		}
		o := r.Scoring
		o.Policy = sc.Policy
		if o != sc {
			return nil, nil, sc, fmt.Errorf("report %d was scored otherwise than report 1 (%+v, not %+v)", i+1, r.Scoring, reps[0].Scoring)
		}
		seeds = append(seeds, m.Cells)
	}
	avg = AverageRepeats(seeds)
	if len(seeds) == 1 {
		seeds = nil
	}
	return avg, seeds, sc, nil
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
