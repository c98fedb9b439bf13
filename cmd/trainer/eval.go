package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"rgcpred/base/cli"
	"rgcpred/base/plot"
	"rgcpred/evaluation"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/model/gpu"
	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rollout"
)

// listFlag collects the values of a repeatable flag.
type listFlag []string

// String joins the values (flag.Value).
func (l *listFlag) String() string { return strings.Join(*l, " ") }

// Set appends a value (flag.Value).
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runEval implements `trainer eval`: flags to an evaluation.Config, then
// evaluation.Evaluate, its table on stdout, its JSON and plot on request.
func runEval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer eval", flag.ContinueOnError)
	data := fs.String("data", "", "recording directory (required)")
	var ckpts, mixes, baselines, compares listFlag
	fs.Var(&ckpts, "ckpt", "checkpoint to evaluate; repeatable; FILE1,FILE2,... are repeats of one model (scores averaged per cell)")
	fs.Var(&mixes, "mix",
		"mixture of models, probabilities averaged: [NAME=][W*]SPEC+[W*]SPEC... with SPEC ckpt:FILE, glm:FILE or zero (e.g. ens=ckpt:a.ckpt+ckpt:b.ckpt); repeatable")
	fs.Var(&baselines, "baseline",
		"baseline to evaluate: zero (per-cell empirical class distribution of the training split) or zero-pooled; repeatable")
	oracle := fs.Bool("oracle", false, "evaluate the exact oracle of a synthetic recording (needs truth.json in --data)")
	glmPath := fs.String("glm", "", "evaluate the GLM in this `FILE`, the JSON that trainer glm writes, exactly, named glm")
	glmBins := fs.String("glm-bins", "",
		"evaluate the same GLM reading only the windows' causal bins, as a daemon could run it, named glm-bins (docs/evaluation.md)")
	splitName := fs.String("split", "test", "split to evaluate: train, val or test")
	jsonOut := fs.String("json", "", "write per-cell results as JSON to this file")
	plotOut := fs.String("plot", "",
		"write a plot comparing the models' IQMs and CIs to FILE.svg and FILE.png (FILE with extension .svg, .png or none)")
	rasterOut := fs.String("raster", "",
		"write a raster of recorded vs rolled-out spikes (each model's first repeat) to FILE.svg and FILE.png")
	rasterCells := fs.String("raster-cells", "",
		"cluster ids of the --raster cells, comma-separated (default: the first 4 evaluated cells)")
	rasterSeconds := fs.Float64("raster-seconds", 10, "length of the --raster stretch in seconds, from the first rolled-out bin")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale of the spike-train metrics, ms")
	cellsSel := fs.String("cells", "quality", "cells to evaluate: quality, all or comma-separated cluster ids")
	threads := fs.Int("threads", 0, "engine threads (0: all cores)")
	batch := fs.Int("batch", 64, "windows per predictor call")
	precision := fs.String("precision", "fp32",
		"arithmetic: fp32, or bf16 or int8 to reproduce a predictord serving in it decision for decision (docs/engine.md)")
	backend := gpu.AddFlags(fs)
	nllStride := fs.Int("nll-stride", 0,
		"score the NLL on every Nth window end (0: 1 for baselines, else the smallest giving at most 60000 windows)")
	resamples := fs.Int("resamples", rollout.DefaultResamples, "bootstrap resamples (at least 2000)")
	seed := fs.Uint64("seed", 1, "bootstrap seed")
	fs.Var(&compares, "compare", "paired per-cell difference A:B of two evaluated models by name (e.g. gpt-a-cat-cpu:glm); repeatable")
	policySpec := fs.String("policy", "median",
		"how a distribution becomes a spike in the rollouts: median (the paper's), sample[:SEED] or threshold:FILE")
	seconds := fs.Float64("seconds", 0,
		"roll out only this many seconds of the split after the first window (0: all; the NLL covers the whole split)")
	blockSeconds := fs.Float64("block-seconds", 0,
		"time blocks of this many seconds: each --compare gets a block x cell bootstrap interval beside the cell-only one, --json keeps the blocks (0: none)")
	stagger := fs.Bool("stagger", false, "staggered starts, as predictord's default (rollout.StartOffset; docs/evaluation.md)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer eval --data DIR (--ckpt FILE ... | --mix SPEC | --baseline zero | --oracle | --glm FILE) [flags]\n"+
			"\n"+
			"Roll the models out autoregressively on a split and score them (NLL, Van Rossum,\n"+
			"Schreiber, smoothed Pearson; IQM over cells with a 95% bootstrap CI).")
		fs.PrintDefaults()
	}
	stim := stimFlag(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return cli.Usagef(fs, "--data is required")
	}
	if len(ckpts) == 0 && len(mixes) == 0 && len(baselines) == 0 && !*oracle && *glmPath == "" && *glmBins == "" {
		return cli.Usagef(fs, "nothing to evaluate: give --ckpt, --mix, --baseline zero, --oracle or --glm")
	}
	switch {
	case *batch < 1:
		return fmt.Errorf("--batch %d: want at least 1", *batch)
	case *nllStride < 0:
		return fmt.Errorf("--nll-stride %d: want 0 (auto) or more", *nllStride)
	case *resamples < rollout.DefaultResamples:
		return fmt.Errorf("--resamples %d: want at least %d", *resamples, rollout.DefaultResamples)
	case *seconds < 0:
		return fmt.Errorf("--seconds %v: want 0 or more", *seconds)
	case *blockSeconds < 0:
		return fmt.Errorf("--block-seconds %v: want 0 or more", *blockSeconds)
	case *rasterSeconds <= 0:
		return fmt.Errorf("--raster-seconds %v: want more than 0", *rasterSeconds)
	}
	for _, path := range []string{*plotOut, *rasterOut} {
		if path != "" {
			if _, _, err := plot.Paths(path); err != nil {
				return err
			}
		}
	}
	split, err := rgc.ParseSplit(*splitName)
	if err != nil {
		return fmt.Errorf("--split: %w", err)
	}
	metrics, err := rollout.NewMetrics(*sigmaMs, rgc.BinMs)
	if err != nil {
		return fmt.Errorf("--sigma-ms: %w", err)
	}
	policy, err := rollout.ParsePolicy(*policySpec)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	if err := checkFiles(ckpts, *glmPath, *glmBins); err != nil {
		return err
	}
	rec, cells, err := loadCells(*data, *cellsSel, *stim)
	if err != nil {
		return err
	}
	// The models in report order: baselines, oracle, GLM, checkpoints,
	// mixtures.
	var specs []string
	for _, b := range baselines {
		if b != "zero" && b != "zero-pooled" {
			return fmt.Errorf("--baseline %q: want zero or zero-pooled", b)
		}
		specs = append(specs, b)
	}
	if *oracle {
		specs = append(specs, "oracle")
	}
	if *glmPath != "" {
		specs = append(specs, "glm:"+*glmPath)
	}
	if *glmBins != "" {
		specs = append(specs, "glm-bins:"+*glmBins)
	}
	for _, c := range ckpts {
		specs = append(specs, "ckpt:"+c)
	}
	for _, m := range mixes {
		specs = append(specs, "mix:"+m)
	}
	cfg := evaluation.Config{Options: evaluation.Options{Rec: rec, Cells: cells, Split: split, Metrics: metrics,
		Batch: *batch, NLLStride: *nllStride, Stagger: *stagger, Policy: policy, MaxBins: int(*seconds * rgc.BinRateHz),
		Resamples: *resamples, Seed: *seed, Progress: os.Stderr, BlockBins: evaluation.BlockBins(*blockSeconds)},
		SigmaMs: *sigmaMs, Compare: compares}
	if *rasterOut != "" {
		if cfg.Keep, err = rasterKeep(rec, cells, *rasterCells, *rasterSeconds); err != nil {
			return err
		}
	}
	prec, err := engine.ParsePrecision(*precision)
	if err != nil {
		return fmt.Errorf("--precision: %w", err)
	}
	env := evaluation.SpecEnv{Rec: rec, Data: *data, Cells: cells, Batch: *batch, Threads: *threads, Precision: prec}
	if cuda, err := backend.CUDA(); err != nil {
		return err
	} else if cuda {
		gopts, err := backend.Options(*batch)
		if err != nil {
			return err
		}
		env.GPU = &gopts
	}
	for _, s := range specs {
		sp, err := evaluation.ParseSpec(s, env)
		if err != nil {
			return err
		}
		cfg.Models = append(cfg.Models, sp)
	}
	rep, err := evaluation.Evaluate(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout)
	if *jsonOut != "" {
		if err := evaluation.WriteJSON(*jsonOut, rep); err != nil {
			return err
		}
	}
	if *plotOut != "" {
		if err := savePlot(rep.Plot(), *plotOut); err != nil {
			return err
		}
	}
	if *rasterOut != "" {
		r, err := rep.Raster()
		if err != nil {
			return err
		}
		if err := savePlot(r, *rasterOut); err != nil {
			return err
		}
	}
	return nil
}

// checkFiles reads every --ckpt checkpoint and --glm/--glm-bins file once,
// so that a bad one is reported before the recording is loaded and the
// evaluation's header printed.
func checkFiles(ckpts []string, glms ...string) error {
	for _, c := range ckpts {
		for _, path := range cli.List(c) {
			if _, err := model.LoadCheckpoint(path); err != nil {
				return fmt.Errorf("--ckpt: %w", err)
			}
		}
	}
	for _, path := range glms {
		if path == "" {
			continue
		}
		if _, err := glm.LoadTruth(path); err != nil {
			return err // "load glm PATH: ..."
		}
	}
	return nil
}

// savePlot writes a plot as SVG and PNG (plot.SaveBoth) and names the files
// on stdout.
func savePlot(d plot.Saver, path string) error {
	files, err := plot.SaveBoth(d, path)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", strings.Join(files, " and "))
	return nil
}

// rasterKeep selects the trains of a raster: the cells given as
// comma-separated cluster ids (default the first 4 evaluated cells) over
// the first seconds of the rollout.
func rasterKeep(rec *rgc.Recording, cells []int, ids string, seconds float64) (*evaluation.KeepTrains, error) {
	k := &evaluation.KeepTrains{Bins: int(seconds * rgc.BinRateHz)}
	if ids == "" {
		for _, ci := range cells[:min(4, len(cells))] {
			k.ClusterIDs = append(k.ClusterIDs, rec.Cells[ci].ClusterID)
		}
		return k, nil
	}
	var err error
	if k.ClusterIDs, err = cli.Ints(ids); err != nil {
		return nil, fmt.Errorf("--raster-cells: %w", err)
	}
	return k, nil
}
