package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"rgcpred/base/cli"
	"rgcpred/base/plot"
	"rgcpred/evaluation"
	"rgcpred/model"
	"rgcpred/model/train"
	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rollout"
)

// trainFlags are the flags shared by train and lr-find.
type trainFlags struct {
	data, config, cells string
	batch, threads      int
	seed                uint64
	stim                *rgc.StimMode
}

func (f *trainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", "data/chicken-17-08-21", "recording directory")
	fs.StringVar(&f.config, "config", shippedConfig, "model: STEM-HEAD[-cpu], e.g. gpt-a-cat-cpu (the shipped one), gpt-a-cat (the paper CNN)")
	fs.StringVar(&f.cells, "cells", "quality", "cells to train on: quality, all or comma-separated cluster ids")
	fs.IntVar(&f.batch, "batch", 64, "batch size")
	fs.IntVar(&f.threads, "threads", runtime.NumCPU(), "compute goroutines")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed (initialisation, sampling)")
	f.stim = stimFlag(fs)
}

// options loads the recording and builds the training options.
func (f *trainFlags) options() (train.Options, error) {
	rec, cells, err := loadCells(f.data, f.cells, *f.stim)
	if err != nil {
		return train.Options{}, err
	}
	cfg, err := model.ParseConfigName(f.config, len(cells))
	if err != nil {
		return train.Options{}, err
	}
	return train.Options{Data: f.data, Rec: rec, Cells: cells, Config: cfg, Batch: f.batch,
		Threads: f.threads, Seed: f.seed, Log: os.Stderr}, nil
}

func runTrain(ctx context.Context, args []string) (err error) {
	fs := cli.NewFlagSet("trainer train", "[flags]",
		"Train a model on a recording (AdamW, one-cycle schedule, early stopping; resumable), writing its best checkpoint.")
	var tf trainFlags
	tf.register(fs)
	steps := fs.Int("steps", 2000, "planned optimiser steps (with --time: a cap, none unless given)")
	lr := fs.Float64("lr", 1e-3, "peak learning rate of the one-cycle schedule")
	out := fs.String("out", "",
		"best checkpoint, with OUT.resume and OUT-loss.svg/.png (default: FILE for --resume FILE.resume, else out/CONFIG.ckpt)")
	valEvery := fs.Int("val-every", 100, "steps between validations")
	valWindows := fs.Int("val-windows", 2048, "validation windows (fixed subset)")
	resume := fs.String("resume", "", "resume checkpoint to continue from")
	teacher := fs.String("teacher", "",
		"distil from this `MODEL`: a GLM JSON file (trainer glm) or a spec ckpt:FILE, glm:FILE or mix:... (trainer eval's --mix); targets mix in its distributions")
	distill := fs.Float64("distill", 0.8, "with --teacher: the teacher's share of the targets at the start")
	distillEnd := fs.Float64("distill-end", 0.6,
		"with --teacher: the fraction of the run at which the teacher's share has fallen linearly to 0 (1e9: held)")
	init := fs.String("init", "",
		"checkpoint whose weights start the run (a warm restart: new optimiser and schedule; its config unless --config names the same; cells may differ)")
	budget := fs.Duration("time", 0,
		"wall-clock budget (e.g. 90m): the schedule follows the time used and training ends when it is spent; 0 = step-bound")
	progress := fs.Duration("progress", 10*time.Second, "interval between progress lines")
	precision := precisionFlag(fs)
	replicas := replicasFlag(fs)
	ema := emaFlag(fs)
	profile := profileFlag(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	stopProfile, err := startProfile(*profile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	if *init != "" && !flagSet(fs, "config") {
		// A warm restart keeps its checkpoint's architecture unless
		// --config names one (which must then match).
		ck, err := model.LoadCheckpoint(*init)
		if err != nil {
			return fmt.Errorf("--init: %w", err)
		}
		tf.config = ck.Weights.Config.Name()
	}
	o, err := tf.options()
	if err != nil {
		return err
	}
	o.Precision, o.Replicas, o.EMA = *precision, *replicas, *ema
	o.Steps, o.LR, o.Out, o.ValEvery, o.ValWindows, o.Resume, o.ProgressEvery = *steps, *lr, *out, *valEvery, *valWindows, *resume, *progress
	o.Init = *init
	switch {
	case *out == "" && strings.HasSuffix(*resume, ".resume"):
		*out = strings.TrimSuffix(*resume, ".resume")
	case *out == "":
		*out = filepath.Join("out", o.Config.Name()+".ckpt")
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	o.Out = *out
	if *teacher != "" {
		t, release, err := loadTeacher(*teacher, o.Rec, o.Cells, o.Batch)
		if err != nil {
			return err
		}
		defer release()
		o.Teacher, o.Distill, o.DistillEnd = t, *distill, *distillEnd
	}
	o.TimeBudget = *budget
	if *budget > 0 && !flagSet(fs, "steps") {
		o.Steps = math.MaxInt32 // --time alone: the budget ends the run, not the default step count
	}
	o.Notes = "trainer train " + strings.Join(args, " ")
	res, err := train.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("%d steps in %s (%.1f samples/s; this session %.1f in steps, validation %s); best val NLL %.4f at step %d (zero-input %.4f pooled, %.4f per cell); best checkpoint %s\n",
		res.Steps, res.Elapsed.Round(time.Second), res.SamplesPerSec, res.StepSamplesPerSec, res.Validation.Round(time.Second),
		res.BestVal, res.BestStep, res.ZeroPooled, res.ZeroPerCel, *out)
	if res.Interrupted {
		fmt.Printf("interrupted: continue with --resume %s.resume\n", *out)
	}
	return nil
}

// loadTeacher builds the teacher a --teacher value names on rec, checking
// that it knows every training cell: a model spec (ckpt:FILE, glm:FILE or
// mix:..., as trainer eval's; a checkpoint runs on one engine thread of
// batch windows) or, for any other value, the JSON file of a GLM fitted by
// `trainer glm`. The returned function releases it.
func loadTeacher(arg string, rec *rgc.Recording, cells []int, batch int) (rgc.Predictor, func(), error) {
	if kind, _, ok := strings.Cut(arg, ":"); ok && (kind == "ckpt" || kind == "glm" || kind == "mix") {
		sp, err := evaluation.ParseSpec(arg, evaluation.SpecEnv{Rec: rec, Cells: cells, Batch: batch, Threads: 1})
		if err != nil {
			return nil, nil, fmt.Errorf("teacher: %w", err)
		}
		if len(sp.Open) != 1 {
			return nil, nil, fmt.Errorf("teacher %s: %d repeats; a teacher is one model (ensemble them with mix:)", arg, len(sp.Open))
		}
		p, release, err := sp.Open[0]()
		if err != nil {
			return nil, nil, fmt.Errorf("teacher: %w", err)
		}
		return p, release, nil
	}
	tr, err := glm.LoadTruth(arg)
	if err != nil {
		return nil, nil, fmt.Errorf("teacher: %w", err)
	}
	ids := make([]int, len(cells))
	for i, c := range cells {
		ids[i] = rec.Cells[c].ClusterID
	}
	if missing := rollout.MissingCells(tr.ClusterIDs(), ids); len(missing) > 0 {
		return nil, nil, fmt.Errorf("teacher %s has no model of cell %d", arg, missing[0])
	}
	p, err := glm.NewPredictor(rec, tr)
	if err != nil {
		return nil, nil, fmt.Errorf("teacher %s: %w", arg, err)
	}
	return p, func() {}, nil
}

func runLRFind(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("trainer lr-find", "[flags]",
		"Learning-rate range test: train briefly at a rising rate, plot the loss against it and propose a peak rate.")
	var tf trainFlags
	tf.register(fs)
	lo := fs.Float64("min", 1e-6, "first rate")
	hi := fs.Float64("max", 1, "last rate")
	steps := fs.Int("steps", 600, "sweep steps")
	probe := fs.Int("probe", 512, "fixed training windows scored at each probe point")
	points := fs.Int("points", 24, "probe points over the sweep")
	plotPath := fs.String("plot", "out/lr-find.svg",
		"plot of loss against rate, written as FILE.svg and FILE.png (extension .svg, .png or none)")
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if _, _, err := plot.Paths(*plotPath); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	o, err := tf.options()
	if err != nil {
		return err
	}
	r, err := train.LRFind(ctx, o, *lo, *hi, *steps, train.LRFindOptions{ProbeWindows: *probe, Points: *points})
	if err != nil {
		return err
	}
	files, err := r.Plot(*plotPath, fmt.Sprintf("lr-find %s, batch %d", o.Config.Name(), o.Batch))
	if err != nil {
		return err
	}
	fmt.Printf("lowest probe loss at lr %.3g, steepest descent at %.3g; suggested peak lr %.3g (plot %s)\n",
		r.MinRate, r.Steepest, r.Suggested, strings.Join(files, ", "))
	return nil
}

func runModel(ctx context.Context, args []string) error {
	fs := cli.NewFlagSet("trainer model", "[flags]",
		"Print a configuration's parameter counts, or describe a checkpoint and score it on a split.")
	name := fs.String("config", shippedConfig, "model: STEM-HEAD[-cpu]")
	cells := fs.Int("cells", 60, "number of cells (rows of the cell embedding)")
	ckpt := fs.String("ckpt", "", "checkpoint to describe and score instead of a configuration")
	data := fs.String("data", "data/chicken-17-08-21", "with --ckpt: recording to score on")
	split := fs.String("split", "val", "with --ckpt: split to score on")
	windows := fs.Int("windows", 16384, "with --ckpt: windows to score (uniform, fixed seed)")
	threads := fs.Int("threads", runtime.NumCPU(), "with --ckpt: inference threads")
	stim := stimFlag(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *ckpt != "" {
		return scoreCheckpoint(ctx, *ckpt, *data, *split, *windows, *threads, *stim)
	}
	c, err := model.ParseConfigName(*name, *cells)
	if err != nil {
		return err
	}
	printCounts(c)
	return nil
}

func printCounts(c model.Config) {
	cnn, gpt, head := c.CountParams("cnn."), c.CountParams("gpt."), c.CountParams("head.")
	fmt.Printf("%s (%d cells): cnn %d, gpt %d (cell embedding %d), head %d, total %d parameters\n",
		c.Name(), c.NumCells, cnn, gpt, c.NumCells*c.Width(), head, c.CountParams(""))
}

// scoreCheckpoint prints a checkpoint's provenance and its NLL on a
// uniform sample of windows of a split, next to the zero-input models
// (training-split class frequencies, pooled and per cell) on the same
// windows.
func scoreCheckpoint(ctx context.Context, path, data, splitName string, n, threads int, stim rgc.StimMode) error {
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		return err
	}
	printCounts(ck.Weights.Config)
	p := ck.Provenance
	fmt.Printf("trained on %s (%s bins): %d steps, validation NLL %.4f (zero-input %.4f), %s\n%s\n",
		p.Data, ck.StimMode, p.Steps, p.ValNLL, p.ZeroInputNLL, p.TrainedAt, p.Notes)
	if p.Precision != "" {
		fmt.Printf("training GEMMs in %s %s\n", p.Precision, p.PrecisionPath)
	}
	if p.EMA != 0 {
		fmt.Printf("weights averaged during training (EMA decay %g)\n", p.EMA)
	}
	split, err := rgc.ParseSplit(splitName)
	if err != nil {
		return err
	}
	rec, err := rgc.LoadMode(data, stim)
	if err != nil {
		return err
	}
	cells, err := rec.CellIndices(ck.CellIDs)
	if err != nil {
		return err
	}
	res, err := train.Score(ctx, ck, rec, split, cells, n, threads)
	if err != nil {
		return err
	}
	fmt.Printf("%s split, %d windows: model NLL %.4f +- %.4f; zero-input %.4f (pooled), %.4f (per cell); "+
		"model - per-cell zero-input %.4f +- %.4f (paired SE)\n",
		split, res.N, res.Model, res.ModelSE, res.ZeroPooled, res.ZeroPerCell, res.Model-res.ZeroPerCell, res.DiffSE)
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
