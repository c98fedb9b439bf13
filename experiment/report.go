package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"rgcpred/evaluation"
	"rgcpred/model"
	"rgcpred/rollout"
)

// Results are an experiment's scores on one split, as written to
// results-SPLIT.json.
type Results struct {
	evaluation.Scoring
	// Data is the recording's directory.
	Data string `json:"data"`
	// CellIDs are the cells scored (cluster ids).
	CellIDs []int `json:"cell_ids"`
	// Plan is the training plan; Budget describes its budget per run.
	Plan   Plan   `json:"plan"`
	Budget string `json:"budget"`
	// Models are the configurations, then the baselines.
	Models []ModelReport `json:"models"`
	// Comparisons are paired per-cell differences between models.
	Comparisons []evaluation.Comparison `json:"comparisons"`
	// TrainSeconds and WallSeconds sum the runs' training and wall times;
	// EvalSeconds the evaluations' times.
	TrainSeconds float64 `json:"train_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
	EvalSeconds  float64 `json:"eval_seconds"`
	// Written is when the results were written (RFC 3339).
	Written string `json:"written"`
}

// ModelReport is one model's results: a configuration over its seeds, or a
// baseline.
type ModelReport struct {
	// Name is the configuration's or the baseline's name.
	Name string `json:"name"`
	// Kind is "config", "zero" or "glm".
	Kind string `json:"kind"`
	// Summary maps each of evaluation.MetricNames to the IQM over cells of Cells with
	// its 95% bootstrap interval.
	Summary map[string]rollout.Summary `json:"summary"`
	// Cells are the per-cell scores, averaged over the seeds.
	Cells []evaluation.CellScores `json:"cells"`
	// Runs are a configuration's runs, one per seed.
	Runs []RunReport `json:"runs,omitempty"`
	// SeedRange gives per metric the lowest and highest of the runs' own
	// IQMs over cells (a configuration only).
	SeedRange map[string][2]float64 `json:"seed_range,omitempty"`
	// Samples, TrainSeconds, WallSeconds and EvalSeconds sum over the runs
	// (a baseline: its evaluation time).
	Samples      int64   `json:"samples,omitempty"`
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	WallSeconds  float64 `json:"wall_seconds,omitempty"`
	EvalSeconds  float64 `json:"eval_seconds"`
	// NLLStride is the NLL's window stride.
	NLLStride int `json:"nll_stride"`
}

// RunReport is one run's results.
type RunReport struct {
	// Seed is the run's training seed.
	Seed uint64 `json:"seed"`
	// Dir is the run's directory, relative to the experiment's.
	Dir string `json:"dir"`
	// Steps taken, the best checkpoint's step and validation NLL, whether
	// early stopping ended the run, and the training windows seen.
	Steps    int     `json:"steps"`
	BestStep int     `json:"best_step"`
	BestVal  float64 `json:"best_val"`
	Stopped  bool    `json:"stopped"`
	Samples  int64   `json:"samples"`
	// TrainSeconds, WallSeconds and EvalSeconds are the run's training,
	// wall-clock training and evaluation times.
	TrainSeconds float64 `json:"train_seconds"`
	WallSeconds  float64 `json:"wall_seconds"`
	EvalSeconds  float64 `json:"eval_seconds"`
	// Summary and Cells are this seed's own scores.
	Summary map[string]rollout.Summary `json:"summary"`
	Cells   []evaluation.CellScores    `json:"cells"`
}

// results assembles the results from the runs' and baselines' evaluations.
func (x *exp) results(evals map[string]*evalRecord, base []*evalRecord) (*Results, error) {
	sc, err := evaluation.NewScoring(&evaluation.Config{Options: x.evalOptions(), SigmaMs: x.evs.SigmaMs})
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	res := &Results{
		Scoring: sc, Data: x.plan.Data, CellIDs: x.ids, Plan: x.plan,
		Budget: x.plan.Budget.String(x.plan.Batch), Written: time.Now().UTC().Format(time.RFC3339),
	}
	for _, c := range x.plan.Configs {
		m := ModelReport{Name: c, Kind: "config"}
		var reps [][]evaluation.CellScores
		for _, s := range x.plan.Seeds {
			r := x.man.run(c, s)
			ev := evals[r.Name]
			if err := x.checkCells(r.Name, ev.Cells); err != nil {
				return nil, err
			}
			sum, err := evaluation.Summarise(ev.Cells, x.evs.Resamples, x.evs.Seed)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", r.Name, err)
			}
			m.Runs = append(m.Runs, RunReport{Seed: s, Dir: filepath.Join("runs", r.Name), Steps: r.Steps,
				BestStep: r.BestStep, BestVal: r.BestVal, Stopped: r.Stopped, Samples: r.Samples,
				TrainSeconds: r.TrainSeconds, WallSeconds: r.WallSeconds, EvalSeconds: ev.Seconds,
				Summary: sum, Cells: ev.Cells})
			m.Samples += r.Samples
			m.TrainSeconds += r.TrainSeconds
			m.WallSeconds += r.WallSeconds
			m.EvalSeconds += ev.Seconds
			m.NLLStride = ev.NLLStride
			reps = append(reps, ev.Cells)
		}
		m.Cells = evaluation.AverageRepeats(reps)
		if m.Summary, err = evaluation.Summarise(m.Cells, x.evs.Resamples, x.evs.Seed); err != nil {
			return nil, fmt.Errorf("configuration %s: %w", c, err)
		}
		m.SeedRange = seedRange(m.Runs)
		res.Models = append(res.Models, m)
	}
	for _, ev := range base {
		if err := x.checkCells(ev.Model, ev.Cells); err != nil {
			return nil, err
		}
		m := ModelReport{Name: ev.Model, Kind: ev.Key.Kind, Cells: ev.Cells, EvalSeconds: ev.Seconds, NLLStride: ev.NLLStride}
		if m.Summary, err = evaluation.Summarise(m.Cells, x.evs.Resamples, x.evs.Seed); err != nil {
			return nil, fmt.Errorf("baseline %s: %w", ev.Model, err)
		}
		res.Models = append(res.Models, m)
	}
	for _, m := range res.Models {
		res.TrainSeconds += m.TrainSeconds
		res.WallSeconds += m.WallSeconds
		res.EvalSeconds += m.EvalSeconds
	}
	pairs, err := comparisons(x.plan.Configs, res.Models, x.evs.Compare)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		c, err := compare(p, res.Models, sc, x.evs.Resamples, x.evs.Seed)
		if err != nil {
			return nil, err
		}
		res.Comparisons = append(res.Comparisons, *c)
	}
	return res, nil
}

// checkCells checks that a model's scores are of the experiment's cells,
// in order.
func (x *exp) checkCells(name string, cells []evaluation.CellScores) error {
	if len(cells) != len(x.ids) {
		return fmt.Errorf("%s: scores of %d cells, want %d", name, len(cells), len(x.ids))
	}
	for i, c := range cells {
		if c.ClusterID != x.ids[i] {
			return fmt.Errorf("%s: cell %d is %d, want %d", name, i, c.ClusterID, x.ids[i])
		}
	}
	return nil
}

// pair is a comparison to make: A - B, named.
type pair struct{ name, a, b string }

// comparisons lists the paired comparisons: the head comparisons (cat -
// logmix) and the stem comparisons (gpt-b - gpt-a) between configurations
// that differ in that alone, every configuration against every baseline,
// then the extra "A:B" pairs.
func comparisons(configs []string, models []ModelReport, extra []string) ([]pair, error) {
	type parsed struct{ name, stem, head, preset string }
	var ps []parsed
	for _, c := range configs {
		cfg, err := model.ParseConfigName(c, 1)
		if err != nil {
			return nil, err
		}
		ps = append(ps, parsed{c, cfg.Stem, cfg.Head, strings.TrimPrefix(cfg.Name(), cfg.Stem+"-"+cfg.Head)})
	}
	var heads, stems []pair
	for i := range ps {
		for j := i + 1; j < len(ps); j++ {
			a, b := ps[i], ps[j]
			if a.preset != b.preset {
				continue
			}
			switch {
			case a.stem == b.stem && a.head != b.head:
				// cat first: the paper's claim is that it beats logmix.
				if b.head == model.HeadCat || (a.head != model.HeadCat && b.head < a.head) {
					a, b = b, a
				}
				heads = append(heads, pair{fmt.Sprintf("%s - %s (%s%s)", a.head, b.head, a.stem, a.preset), a.name, b.name})
			case a.head == b.head && a.stem != b.stem:
				// The larger stem first (gpt-b - gpt-a).
				if a.stem < b.stem {
					a, b = b, a
				}
				stems = append(stems, pair{fmt.Sprintf("%s - %s (%s%s)", a.stem, b.stem, a.head, a.preset), a.name, b.name})
			}
		}
	}
	out := append(heads, stems...)
	for _, m := range models {
		if m.Kind == "config" {
			continue
		}
		for _, c := range configs {
			out = append(out, pair{c + " - " + m.Name, c, m.Name})
		}
	}
	known := map[string]bool{}
	for _, m := range models {
		known[m.Name] = true
	}
	for _, e := range extra {
		a, b, _ := strings.Cut(e, ":")
		for _, n := range []*string{&a, &b} {
			if cfg, err := model.ParseConfigName(*n, 1); err == nil {
				*n = cfg.Name()
			}
			if !known[*n] {
				return nil, fmt.Errorf("comparison %q: no model %s in this experiment", e, *n)
			}
		}
		out = append(out, pair{a + " - " + b, a, b})
	}
	return out, nil
}

// seedRange returns per metric the lowest and highest of the runs' own
// IQMs.
func seedRange(runs []RunReport) map[string][2]float64 {
	if len(runs) == 0 {
		return nil
	}
	out := map[string][2]float64{}
	for _, metric := range evaluation.MetricNames {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range runs {
			if s, ok := r.Summary[metric]; ok {
				lo, hi = min(lo, s.IQM), max(hi, s.IQM)
			}
		}
		if lo <= hi {
			out[metric] = [2]float64{lo, hi}
		}
	}
	return out
}

// compare computes a paired comparison of the seed-averaged scores and,
// when either model has seeds, spreads it over them: seed k of A against
// seed k of B (or B itself, a baseline), each seed's own paired IQM. When
// the scores were kept in time blocks (sc.BlockBins), each metric also gets
// the time-block x cell interval of the seed-averaged difference.
func compare(p pair, models []ModelReport, sc evaluation.Scoring, resamples int, seed uint64) (*evaluation.Comparison, error) {
	find := func(n string) *ModelReport {
		for i := range models {
			if models[i].Name == n {
				return &models[i]
			}
		}
		return nil
	}
	a, b := find(p.a), find(p.b)
	if a == nil || b == nil {
		return nil, fmt.Errorf("comparison %s: unknown model", p.name)
	}
	seeds := func(m *ModelReport) [][]evaluation.CellScores {
		var out [][]evaluation.CellScores
		for _, r := range m.Runs {
			out = append(out, r.Cells)
		}
		return out
	}
	c, err := evaluation.CompareSeeds(p.name, p.a, p.b, a.Cells, b.Cells, seeds(a), seeds(b), resamples, seed)
	if err != nil || sc.BlockBins == 0 {
		return c, err
	}
	// A baseline has no runs: its one set of scores is its only repeat.
	repeats := func(m *ModelReport) [][]evaluation.CellScores {
		if r := seeds(m); len(r) > 0 {
			return r
		}
		return [][]evaluation.CellScores{m.Cells}
	}
	if err := c.AddBlocks(repeats(a), repeats(b), sc.BlockSeconds(), resamples, seed); err != nil {
		return nil, fmt.Errorf("comparison %s: %w", p.name, err)
	}
	return c, nil
}

// PrintTable prints the results as an evaluation.Table (one row per
// model: the seeds, IQM [95% CI] of each metric over cells with the seeds
// averaged per cell and the range of the seeds' own IQMs, the training
// time per run), then the paired differences with their spread over the
// seeds.
func PrintTable(w io.Writer, r *Results) {
	t := &evaluation.Table{Scoring: r.Scoring, Clauses: []string{"budget per run " + r.Budget},
		Note: "per-cell scores averaged over seeds", Lead: []string{"seeds"}, Trail: []string{"train/run"}}
	for _, m := range r.Models {
		seeds, train := "-", "-"
		if len(m.Runs) > 0 {
			seeds = fmt.Sprint(len(m.Runs))
			train = seconds(m.TrainSeconds / float64(len(m.Runs)))
		}
		t.Rows = append(t.Rows, evaluation.Row{Name: m.Name, Cells: len(m.Cells), Summary: m.Summary,
			Lead: []string{seeds}, Trail: []string{train}, SeedRange: m.SeedRange})
	}
	evaluation.WriteTable(w, t)
	evaluation.PrintComparisons(w, r.Comparisons)
}

// write saves the results JSON and the figure and prints the table.
func (x *exp) write(res *Results) error {
	base := filepath.Join(x.dir, "results-"+res.Split)
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := writeFileAtomic(base+".json", append(data, '\n')); err != nil {
		return err
	}
	fig := filepath.Join(x.dir, "figure-"+res.Split)
	if err := WriteFigure(fig+".png", res); err != nil {
		return err
	}
	if err := WriteFigure(fig+".svg", res); err != nil {
		return err
	}
	x.mu.Lock()
	x.endStatus()
	x.mu.Unlock()
	PrintTable(x.out, res)
	x.logf("results %s.json, figure %s.png and .svg", base, fig)
	return nil
}
