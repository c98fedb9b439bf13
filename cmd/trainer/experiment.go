package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"rgcpred/base/cli"
	"rgcpred/experiment"
	"rgcpred/rollout"
)

// Defaults of `trainer experiment`: the paper's grid on the cpu CNN preset,
// three seeds, the shipped recording and its GLM.
const (
	defaultData    = "data/chicken-17-08-21"
	defaultGLM     = "models/glm-chicken-17-08-21.json"
	defaultConfigs = "gpt-a-cat-cpu,gpt-a-logmix-cpu,gpt-b-cat-cpu,gpt-b-logmix-cpu"
)

// planFlags are the flags that set the experiment's plan; with --resume
// the plan comes from the manifest and they may not be given.
var planFlags = []string{"data", "cells", "stim", "configs", "seeds", "repeats", "steps", "samples", "time",
	"batch", "lr", "val-every", "val-windows", "segment", "threads"}

// runExperiment implements `trainer experiment`.
func runExperiment(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer experiment", flag.ContinueOnError)
	dir := fs.String("dir", "", "experiment directory: manifest, runs, results (required unless --resume)")
	resume := fs.String("resume", "", "continue the experiment in this directory with its recorded plan (evaluation flags may change)")
	data := fs.String("data", defaultData, "recording directory")
	cells := fs.String("cells", "quality", "cells: quality or all")
	stim := stimFlag(fs)
	configs := fs.String("configs", defaultConfigs, "model configurations, comma-separated (STEM-HEAD[-cpu])")
	seeds := fs.String("seeds", "1,2,3", "training seeds, comma-separated: the repeats of every configuration")
	repeats := fs.Int("repeats", 0, "N repeats with seeds 1..N (instead of --seeds)")
	steps := fs.Int("steps", 2000, "budget per run: optimiser steps (with --time: a cap)")
	samples := fs.Int64("samples", 0, "budget per run: training windows (ceil(samples/batch) steps) instead of --steps")
	budget := fs.Duration("time", 0, "budget per run: training time (e.g. 30m) instead of --steps; not reproducible")
	batch := fs.Int("batch", 64, "batch size")
	lr := fs.Float64("lr", 1e-3, "peak learning rate of the one-cycle schedule")
	threads := fs.Int("threads", runtime.NumCPU(), "compute goroutines of training and evaluation (part of the plan: results depend on it)")
	valEvery := fs.Int("val-every", 100, "steps between validations")
	valWindows := fs.Int("val-windows", 2048, "validation windows (fixed subset)")
	segment := fs.Int("segment", -1,
		fmt.Sprintf("steps between saved segments a killed run continues from (0: none; default %d x --val-every)",
			experiment.DefaultSegmentValidations))
	splitName := fs.String("split", "val", "split to evaluate the runs on: val, or test for reports")
	glmPath := fs.String("glm", "",
		"GLM baseline: the JSON that trainer glm writes (default "+defaultGLM+" with the default --data; none: leave it out)")
	sigmaMs := fs.Float64("sigma-ms", rollout.DefaultSigmaMs, "smoothing time scale of the spike-train metrics, ms")
	nllStride := fs.Int("nll-stride", 0, "score the NLL on every Nth window end (0: as trainer eval does)")
	stagger := fs.Bool("stagger", false, "staggered rollout starts, as predictord runs by default")
	policy := fs.String("policy", "median", "spike policy of the rollouts: median (the paper's), sample[:SEED], threshold:FILE")
	evalSeconds := fs.Float64("eval-seconds", 0,
		"roll out only this many seconds of the split after the first window (0: all; the NLL covers all)")
	blockSeconds := fs.Float64("block-seconds", 0,
		"time blocks of this many seconds: each paired comparison gets a block x cell bootstrap interval beside the cell-only one (0: none)")
	evalBatch := fs.Int("eval-batch", 64, "windows per predictor call in the evaluation")
	resamples := fs.Int("resamples", rollout.DefaultResamples, "bootstrap resamples (at least 2000)")
	bootSeed := fs.Uint64("bootstrap-seed", 1, "bootstrap seed")
	var compares listFlag
	fs.Var(&compares, "compare", "extra paired comparison A:B (A - B per cell) of configurations or baselines (glm, zero); repeatable")
	progress := fs.Duration("progress", 10*time.Second, "interval between progress lines when stdout is not a terminal")
	jobs := fs.Int("jobs", 1, "runs that train at once, each with --threads goroutines; results do not depend on it; allowed with --resume")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: trainer experiment --dir DIR [--configs A,B,...] [--seeds 1,2,3 | --repeats N]
                          [--steps N | --samples N | --time D] [flags]
       trainer experiment --resume DIR [--split test] [--jobs N] [evaluation flags]

Train a grid of configurations x seeds at a matched budget, evaluate every run on a
split (NLL, Van Rossum, Schreiber, smoothed Pearson; per-cell scores averaged over
seeds, IQM over cells with 95% bootstrap CIs) next to the GLM and zero-input
baselines, with paired per-cell differences, and draw the paper's figure.
Resumable: run the same command again (or --resume DIR) after an interruption.`)
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if *jobs < 1 {
		return fmt.Errorf("--jobs %d: want at least 1", *jobs)
	}
	o := experiment.Options{Dir: *dir, Command: append([]string{"trainer", "experiment"}, args...),
		Out: os.Stdout, ProgressEvery: *progress, Jobs: *jobs}
	if *resume != "" {
		if *dir != "" && *dir != *resume {
			return fmt.Errorf("--dir %s and --resume %s differ", *dir, *resume)
		}
		for _, n := range planFlags {
			if set[n] {
				return fmt.Errorf("--%s: --resume continues the plan of %s/%s; give it without plan flags", n, *resume, experiment.ManifestFile)
			}
		}
		m, err := experiment.LoadManifest(*resume)
		if err != nil {
			return err
		}
		o.Dir, o.Plan, o.Eval = *resume, m.Plan, m.Eval
	} else {
		if *dir == "" {
			return cli.Usagef(fs, "--dir is required")
		}
		p := experiment.Plan{Data: *data, Cells: *cells, Stim: *stim, Configs: cli.List(*configs), Batch: *batch, LR: *lr,
			ValEvery: *valEvery, ValWindows: *valWindows, Segment: *segment, Threads: *threads}
		if p.Segment < 0 {
			p.Segment = experiment.DefaultSegmentValidations * p.ValEvery
		}
		var err error
		if p.Seeds, err = parseSeeds(*seeds, *repeats, set["seeds"]); err != nil {
			return err
		}
		switch {
		case set["samples"] && (set["steps"] || set["time"]):
			return errors.New("--samples: give one of --steps, --samples and --time")
		case set["samples"]:
			p.Budget.Samples = *samples
		case set["time"]:
			p.Budget.Time = experiment.Duration(*budget)
			if set["steps"] {
				p.Budget.Steps = *steps
			}
		default:
			p.Budget.Steps = *steps
		}
		o.Plan, o.Eval = p, experiment.DefaultEvalSettings()
		if *data == defaultData {
			if _, err := os.Stat(defaultGLM); err == nil {
				o.Eval.GLM = defaultGLM
			}
		}
	}
	e := &o.Eval
	if set["split"] || *resume == "" {
		e.Split = *splitName
	}
	if set["glm"] {
		e.GLM = *glmPath
		if *glmPath == "none" {
			e.GLM = ""
		}
	}
	if set["sigma-ms"] {
		e.SigmaMs = *sigmaMs
	}
	if set["nll-stride"] {
		e.NLLStride = *nllStride
	}
	if set["stagger"] {
		e.Stagger = *stagger
	}
	if set["policy"] {
		e.Policy = *policy
	}
	if set["eval-seconds"] {
		e.Seconds = *evalSeconds
	}
	if set["block-seconds"] {
		e.BlockSeconds = *blockSeconds
	}
	if set["eval-batch"] {
		e.Batch = *evalBatch
	}
	if set["resamples"] {
		e.Resamples = *resamples
	}
	if set["bootstrap-seed"] {
		e.Seed = *bootSeed
	}
	if set["compare"] {
		e.Compare = compares
	}
	_, err := experiment.Run(ctx, o)
	return err
}

// parseSeeds returns the training seeds: 1..repeats when repeats is set,
// else the comma-separated list.
func parseSeeds(list string, repeats int, listSet bool) ([]uint64, error) {
	if repeats != 0 {
		if listSet {
			return nil, errors.New("--repeats: give --seeds or --repeats, not both")
		}
		if repeats < 1 {
			return nil, fmt.Errorf("--repeats %d: want at least 1", repeats)
		}
		seeds := make([]uint64, repeats)
		for i := range seeds {
			seeds[i] = uint64(i + 1)
		}
		return seeds, nil
	}
	var seeds []uint64
	for _, v := range cli.List(list) {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %w", list, err)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("--seeds %q: no seeds", list)
	}
	return seeds, nil
}
