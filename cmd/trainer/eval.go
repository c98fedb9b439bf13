package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"rgcpred/experiment"
	"rgcpred/internal/plot"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// listFlag collects the values of a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// evalJSON is eval's JSON output.
type evalJSON struct {
	experiment.Scoring
	Models []experiment.ModelResult `json:"models"`
	// Comparisons are the paired per-cell differences asked for with
	// --compare.
	Comparisons []experiment.Comparison `json:"comparisons,omitempty"`
}

// runEval implements `trainer eval`.
func runEval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	data := fs.String("data", "", "recording directory (required)")
	var ckpts, baselines, compares listFlag
	fs.Var(&ckpts, "ckpt", "checkpoint to evaluate; repeat the flag for several models; FILE1,FILE2,... are repeats of one model (scores averaged per cell)")
	fs.Var(&baselines, "baseline", "baseline to evaluate: zero (per-cell empirical class distribution of the training split) or zero-pooled; repeatable")
	oracle := fs.Bool("oracle", false, "evaluate the exact oracle of a synthetic recording (needs truth.json in --data)")
	glmPath := fs.String("glm", "", "evaluate the GLM fitted by `trainer glm` (its JSON file), exactly, named glm")
	splitName := fs.String("split", "test", "split to evaluate: train, val or test")
	jsonOut := fs.String("json", "", "write per-cell results as JSON to this file")
	plotOut := fs.String("plot", "", "write an SVG comparing the models' IQMs and CIs to this file")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale of the spike-train metrics, ms")
	cellsSel := fs.String("cells", "quality", "cells to evaluate: quality or all")
	threads := fs.Int("threads", 0, "engine threads (0: all cores)")
	batch := fs.Int("batch", 64, "windows per predictor call")
	nllStride := fs.Int("nll-stride", 0, "score the NLL on every Nth window end; 0: 1 for input-free baselines, else the smallest stride giving at most 60000 windows (about the rollout's count)")
	resamples := fs.Int("resamples", rollout.DefaultResamples, "bootstrap resamples (at least 2000)")
	seed := fs.Uint64("seed", 1, "bootstrap seed")
	fs.Var(&compares, "compare", "paired per-cell difference A:B of two evaluated models by name (e.g. gpt-a-cat-cpu:glm), IQM with a 95% bootstrap CI; repeatable")
	policySpec := fs.String("policy", "median", "how a distribution becomes a spike in the rollouts: median (the paper's rule; its metrics use it), sample[:SEED] (draw the class, seeded per cell and window), threshold:FILE (per-cell thresholds from trainer fit-threshold)")
	seconds := fs.Float64("seconds", 0, "roll out only this many seconds of the split after the first window (0: all; the NLL covers the whole split)")
	stagger := fs.Bool("stagger", false, "staggered starts, as predictord runs by default: cell i (ascending cluster id) of n starts its rollout floor(i*80/n) bins late (rollout.StartOffset), its train holding the recorded spikes until then")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer eval --data DIR (--ckpt FILE ... | --baseline zero | --oracle | --glm FILE) [flags]\n\nRoll the models out autoregressively on a split and score them (NLL, Van Rossum,\nSchreiber, smoothed Pearson; IQM over cells with a 95% bootstrap CI).")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *data == "" {
		fs.Usage()
		return errors.New("--data is required")
	}
	if len(ckpts) == 0 && len(baselines) == 0 && !*oracle && *glmPath == "" {
		fs.Usage()
		return errors.New("nothing to evaluate: give --ckpt, --baseline zero, --oracle or --glm")
	}
	if *batch < 1 {
		return fmt.Errorf("--batch %d: want at least 1", *batch)
	}
	if *nllStride < 0 {
		return fmt.Errorf("--nll-stride %d: want 0 (auto) or more", *nllStride)
	}
	split, err := rgc.ParseSplit(*splitName)
	if err != nil {
		return fmt.Errorf("--split: %w", err)
	}
	metrics, err := rollout.NewMetrics(*sigmaMs, rgc.BinMs)
	if err != nil {
		return fmt.Errorf("--sigma-ms: %w", err)
	}
	if *resamples < rollout.DefaultResamples {
		return fmt.Errorf("--resamples %d: want at least %d", *resamples, rollout.DefaultResamples)
	}
	rec, cells, err := loadCells(*data, *cellsSel)
	if err != nil {
		return err
	}
	ids := make([]int, len(cells))
	for i, c := range cells {
		ids[i] = rec.Cells[c].ClusterID
	}
	_, from, to, err := rollout.Bins(rec, split)
	if err != nil {
		return err
	}

	var specs []experiment.ModelSpec
	for _, b := range baselines {
		switch b {
		case "zero", "zero-pooled":
			specs = append(specs, experiment.ZeroSpec(rec, cells, b == "zero-pooled"))
		default:
			return fmt.Errorf("--baseline %q: want zero or zero-pooled", b)
		}
	}
	if *oracle {
		specs = append(specs, experiment.OracleSpec(*data))
	}
	if *glmPath != "" {
		specs = append(specs, experiment.GLMSpec(rec, *glmPath))
	}
	for _, arg := range ckpts {
		paths := strings.Split(arg, ",")
		if slices.Contains(paths, "") {
			return fmt.Errorf("--ckpt %q: empty file name", arg)
		}
		specs = append(specs, experiment.CheckpointSpec(paths, ids, *batch, *threads))
	}

	policy, err := rollout.ParsePolicy(*policySpec)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	if err := rollout.CheckPolicy(policy, ids); err != nil {
		return err
	}
	if *seconds < 0 {
		return fmt.Errorf("--seconds %v: want 0 or more", *seconds)
	}
	maxBins := int(*seconds * rgc.BinRateHz)
	if maxBins > 0 {
		to = min(to, from+maxBins)
	}
	out := evalJSON{Scoring: experiment.Scoring{
		Recording: rec.Name, Split: split.String(), Bins: [2]int{from, to},
		SigmaMs: *sigmaMs, BinMs: rgc.BinMs, TauBins: metrics.TauBins(),
		Resamples: *resamples, Seed: *seed, Stagger: *stagger, Policy: policy.String(),
	}}
	fmt.Fprintf(os.Stderr, "eval: %s, split %s, %d %s cells, rollout bins [%d, %d) (%.1f s), stagger %v, policy %s\n",
		rec.Name, split, len(cells), *cellsSel, from, to, float64(to-from)/rgc.BinRateHz, *stagger, policy)
	eo := experiment.EvalOptions{Rec: rec, Cells: cells, Split: split, Metrics: metrics, Batch: *batch,
		NLLStride: *nllStride, Stagger: *stagger, Resamples: *resamples, Seed: *seed, Progress: os.Stderr,
		Policy: policy, MaxBins: maxBins}
	for _, sp := range specs {
		m, err := experiment.EvaluateModel(ctx, sp, eo)
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", sp.Name, err)
		}
		out.Models = append(out.Models, *m)
	}
	for _, c := range compares {
		a, b, ok := strings.Cut(c, ":")
		ma, mb := findModel(out.Models, a), findModel(out.Models, b)
		if !ok || ma == nil || mb == nil {
			return fmt.Errorf("--compare %q: want A:B, two of the evaluated models (%s)", c, modelNames(out.Models))
		}
		cmp, err := experiment.Compare(a+" - "+b, a, b, ma.Cells, mb.Cells, *resamples, *seed)
		if err != nil {
			return err
		}
		out.Comparisons = append(out.Comparisons, *cmp)
	}
	printEvalTable(os.Stdout, &out)
	experiment.PrintComparisons(os.Stdout, out.Comparisons)
	if *jsonOut != "" {
		if err := writeJSONFile(*jsonOut, &out); err != nil {
			return err
		}
	}
	if *plotOut != "" {
		if err := writeEvalPlot(*plotOut, &out); err != nil {
			return err
		}
	}
	return nil
}

// printEvalTable prints one row per model: IQM [95% CI] of each metric.
func printEvalTable(w io.Writer, r *evalJSON) {
	fmt.Fprintf(w, "%s, split %s, rollout bins [%d, %d), smoothing %g ms (%.2f bins); IQM over cells [95%% bootstrap CI, %d resamples]\n",
		r.Recording, r.Split, r.Bins[0], r.Bins[1], r.SigmaMs, r.TauBins, r.Resamples)
	nameW := len("model")
	for _, m := range r.Models {
		nameW = max(nameW, len(m.Name))
	}
	fmt.Fprintf(w, "%-*s  %5s  %-26s  %-26s  %-26s  %-26s\n", nameW, "model", "cells", "NLL (nats)", "Van Rossum", "Schreiber", "Pearson")
	for _, m := range r.Models {
		fmt.Fprintf(w, "%-*s  %5d", nameW, m.Name, len(m.Cells))
		for _, name := range experiment.MetricNames {
			s := m.Summary[name]
			fmt.Fprintf(w, "  %-26s", fmt.Sprintf("%.4f [%.4f, %.4f]", s.IQM, s.Lo, s.Hi))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "spikes (policy %s): generated / recorded over the rollout bins, cells that fired, median per-cell ratio\n", r.Policy)
	for _, m := range r.Models {
		var gen, recd float64
		var ratios []float64
		fired := 0
		for _, c := range m.Cells {
			gen += c.GeneratedSpikes
			recd += c.RecordedSpikes
			if c.GeneratedSpikes > 0 {
				fired++
			}
			if c.RecordedSpikes > 0 {
				ratios = append(ratios, c.GeneratedSpikes/c.RecordedSpikes)
			}
		}
		med := math.NaN()
		if len(ratios) > 0 {
			slices.Sort(ratios)
			med = ratios[len(ratios)/2]
		}
		fmt.Fprintf(w, "  %-*s  %6.0f / %6.0f = %.3f, %d of %d cells fired, median ratio %.3f\n", nameW, m.Name, gen, recd, gen/max(recd, 1), fired, len(m.Cells), med)
	}
	for _, m := range r.Models {
		if m.NLLStride > 1 {
			fmt.Fprintf(w, "%s: NLL over every %dth window end (--nll-stride 1 for every window)\n", m.Name, m.NLLStride)
		}
	}
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeEvalPlot writes a 2 x 2 grid of charts, one per metric: each model's
// IQM as a point at x = model number (1, 2, ...; the legend names them) and
// its 95% CI as a vertical bar.
func writeEvalPlot(path string, r *evalJSON) error {
	var buf bytes.Buffer
	const cw, ch = 720, 450 // plot.Chart's size
	fmt.Fprintf(&buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", 2*cw, 2*ch, 2*cw, 2*ch)
	for i, name := range experiment.MetricNames {
		c := plot.Chart{Title: experiment.MetricTitles[name], XLabel: "model", YLabel: "IQM over cells, 95% CI"}
		ci := plot.Series{Name: "95% CI"}
		for j, m := range r.Models {
			s := m.Summary[name]
			x := float64(j + 1)
			c.Series = append(c.Series, plot.Series{Name: fmt.Sprintf("%d: %s", j+1, m.Name), X: []float64{x}, Y: []float64{s.IQM}, Points: true})
			ci.X = append(ci.X, x, x, math.NaN())
			ci.Y = append(ci.Y, s.Lo, s.Hi, math.NaN())
		}
		c.Series = append(c.Series, ci)
		var one bytes.Buffer
		if err := c.WriteSVG(&one); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		svg := strings.Replace(one.String(), "<svg ", fmt.Sprintf(`<svg x="%d" y="%d" `, (i%2)*cw, (i/2)*ch), 1)
		buf.WriteString(svg)
	}
	buf.WriteString("</svg>\n")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}

// runMetrics implements `trainer metrics`.
func runMetrics(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	a := fs.String("a", "", "first spike train: .npy count vector (int or float)")
	b := fs.String("b", "", "second spike train: .npy count vector of the same length")
	binMs := fs.Float64("bin-ms", rollout.DefaultBinMs, "bin length, ms")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale, ms")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer metrics --a A.npy --b B.npy [--bin-ms 1.0082] [--sigma-ms 60] [--json]\n\nVan Rossum distance, Schreiber similarity and smoothed Pearson correlation\nbetween two spike trains.")
		fs.PrintDefaults()
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *a == "" || *b == "" {
		fs.Usage()
		return errors.New("--a and --b are required")
	}
	m, err := rollout.NewMetrics(*sigmaMs, *binMs)
	if err != nil {
		return err
	}
	x, err := readTrain(*a)
	if err != nil {
		return err
	}
	y, err := readTrain(*b)
	if err != nil {
		return err
	}
	if len(x) != len(y) {
		return fmt.Errorf("spike trains differ in length: %s has %d bins, %s has %d", *a, len(x), *b, len(y))
	}
	s, err := m.Compare(x, y)
	if err != nil {
		return fmt.Errorf("%s vs %s: %w", *a, *b, err)
	}
	if *asJSON {
		data, err := json.Marshal(s)
		if err != nil {
			return err
		}
		fmt.Println(string(data))
		return nil
	}
	fmt.Printf("van_rossum %.10g\nschreiber  %.10g\npearson    %.10g\n", s.VanRossum, s.Schreiber, s.Pearson)
	return nil
}

// readTrain reads a spike train from a .npy file: a count vector, i.e. an
// array with at most one dimension longer than 1.
func readTrain(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spike train: %w", err)
	}
	defer f.Close()
	arr, err := rgc.ReadNPY(f)
	if err != nil {
		return nil, fmt.Errorf("read spike train %s: %w", path, err)
	}
	long := 0
	for _, d := range arr.Shape {
		if d > 1 {
			long++
		}
	}
	if long > 1 {
		return nil, fmt.Errorf("read spike train %s: shape %v, want a 1-D count vector", path, arr.Shape)
	}
	x, err := arr.Float64s()
	if err != nil {
		return nil, fmt.Errorf("read spike train %s: %w", path, err)
	}
	if len(x) == 0 {
		return nil, fmt.Errorf("read spike train %s: no bins", path)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("read spike train %s: bin %d is %v", path, i, v)
		}
	}
	return x, nil
}

// findModel returns the evaluated model called name, nil if none.
func findModel(ms []experiment.ModelResult, name string) *experiment.ModelResult {
	for i := range ms {
		if ms[i].Name == name {
			return &ms[i]
		}
	}
	return nil
}

// modelNames lists the evaluated models' names.
func modelNames(ms []experiment.ModelResult) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}
