package main

import (
	"context"
	"flag"
	"fmt"

	"rgcpred/base/cli"
	"rgcpred/evaluation"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rollout"
)

// runFitThreshold fits the threshold spike policy (rollout.Threshold) of a
// checkpoint, a GLM or a synthetic recording's oracle on a stretch of the
// validation split (never the scored one) and writes it as JSON for
// `trainer eval --policy threshold:FILE` and `predictord --policy
// threshold:FILE`.
func runFitThreshold(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer fit-threshold", flag.ContinueOnError)
	data := fs.String("data", "data/chicken-17-08-21", "recording directory")
	ckpt := fs.String("ckpt", "", "checkpoint (or --glm, --oracle)")
	glmPath := fs.String("glm", "", "fit for the GLM in this `FILE` (the JSON that trainer glm writes) instead of a checkpoint")
	mix := fs.String("mix", "", "fit for a mixture of models, [NAME=][W*]SPEC+[W*]SPEC... as trainer eval's --mix")
	oracle := fs.Bool("oracle", false, "fit for the exact oracle of a synthetic recording (truth.json in --data) instead of a checkpoint")
	out := fs.String("out", "", "threshold policy JSON to write (required)")
	cellsSel := fs.String("cells", "quality", "cells: quality, all or comma-separated cluster ids")
	splitName := fs.String("split", "val", "split to fit on (never the split you report: trainer eval refuses it)")
	seconds := fs.Float64("seconds", 120, "length of the fitted stretch after the first window, seconds (0: the whole split)")
	iters := fs.Int("iterations", rollout.DefaultFitIterations, "bisection steps of every cell (one rollout of the cells still searching each)")
	maxIters := fs.Int("max-iterations", rollout.DefaultFitMaxIterations, "most bisection steps of a cell whose count is not within --tolerance")
	tol := fs.Float64("tolerance", rollout.DefaultFitTolerance, "relative tolerance of a matched count (or one Poisson standard error if more)")
	threads := fs.Int("threads", 0, "engine threads (0: all cores)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer fit-threshold --ckpt FILE | --glm FILE | --mix SPEC | --oracle --out FILE [flags]\n"+
			"\n"+
			"Choose each cell's threshold on P(spike within the horizon) so that its autoregressive\n"+
			"rollout on a split other than the scored one fires as often as the recorded cell\n"+
			"(threshold policy). Cells whose count no threshold matches are listed.")
		fs.PrintDefaults()
	}
	stim := stimFlag(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if given := btoi(*ckpt != "") + btoi(*glmPath != "") + btoi(*mix != "") + btoi(*oracle); given != 1 || *out == "" {
		return cli.Usagef(fs, "--out and one of --ckpt, --glm, --mix or --oracle are required")
	}
	if *seconds < 0 || *iters < 1 || *maxIters < *iters || !(*tol > 0) {
		return fmt.Errorf("--seconds %v, --iterations %d, --max-iterations %d, --tolerance %v: want >= 0, >= 1, >= --iterations and > 0",
			*seconds, *iters, *maxIters, *tol)
	}
	split, err := rgc.ParseSplit(*splitName)
	if err != nil {
		return fmt.Errorf("--split: %w", err)
	}
	rec, cells, err := loadCells(*data, *cellsSel, *stim)
	if err != nil {
		return err
	}
	ids := make([]int, len(cells))
	for i, c := range cells {
		ids[i] = rec.Cells[c].ClusterID
	}
	var p rgc.Predictor
	source := *ckpt
	switch {
	case *oracle:
		o, err := synth.OracleFromDir(*data)
		if err != nil {
			return err
		}
		o.SetStimMode(rec.StimMode)
		p, source = o, "oracle of "+*data
	case *glmPath != "":
		g, closeFn, err := evaluation.GLMSpec(rec, *glmPath).Open[0]()
		if err != nil {
			return err
		}
		defer closeFn()
		p, source = g, "glm "+*glmPath
	case *mix != "":
		sp, err := evaluation.MixSpec(*mix, evaluation.SpecEnv{Rec: rec, Data: *data, Cells: cells, Batch: len(cells), Threads: *threads})
		if err != nil {
			return err
		}
		m, closeFn, err := sp.Open[0]()
		if err != nil {
			return err
		}
		defer closeFn()
		p, source = m, "mix "+*mix
	default:
		e, closeFn, err := evaluation.OpenCheckpoint(*ckpt, ids, len(cells), *threads, "", rec.StimMode)
		if err != nil {
			return err
		}
		defer closeFn()
		p = e
	}
	opts := rollout.FitOptions{Split: split, Cells: cells, MaxBins: int(*seconds * rgc.BinRateHz),
		Iterations: *iters, MaxIterations: *maxIters, Tolerance: *tol}
	fit, err := rollout.FitThresholds(ctx, rec, p, opts)
	if err != nil {
		return err
	}
	_, from, to, err := rollout.Bins(rec, split)
	if err != nil {
		return err
	}
	if opts.MaxBins > 0 {
		to = min(to, from+opts.MaxBins)
	}
	f := rollout.ThresholdFile{Checkpoint: source, Recording: rec.Name, Split: split.String(), Bins: to - from, Cells: fit}
	if err := evaluation.WriteJSON(*out, f); err != nil {
		return err
	}
	var gen, recd, unmatched int
	for _, c := range fit {
		gen += c.Generated
		recd += c.Recorded
		if m := c.Mismatch(); m != "" {
			fmt.Println(m)
			unmatched++
		}
	}
	fmt.Printf("fitted %d cells on %s split %s (%d bins): %d spikes generated, %d recorded, %d cells matched by no threshold; wrote %s\n",
		len(fit), rec.Name, split, to-from, gen, recd, unmatched, *out)
	return nil
}

// btoi is 1 for true and 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
