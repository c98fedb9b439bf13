// Command nemesis runs seeded, randomised fault schedules against a
// predictord standby group on a local 3-node NATS cluster (package
// bench/nemesis) and prints each schedule's verdict, with the seed that
// reproduces it, and a table of them all.
//
//	nemesis [--schedules 100 | --soak 1h] [--seed 1] [--seconds 30] [--cells 16]
//	        [--faults all] [--instances 2] [--record STREAM] [--auth-keys] [--json FILE] [--dir DIR]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"rgcpred/base/cli"
	"rgcpred/bench/nemesis"
	"rgcpred/evaluation"
)

type options struct {
	setup     nemesis.Setup
	schedules int
	soak      time.Duration
	seed      uint64
	faults    string
	instances int
	ttl       time.Duration
	dir       string
	json      string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := cli.NewFlagSet("nemesis", "[flags]",
		"Run seeded fault schedules over a 3-node NATS cluster and a predictord group, and check each run's decisions against the offline rollout.")
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.setup.Data, "data", "data/chicken-17-08-21", "recording whose test split the device plays")
	fs.StringVar(&o.setup.Model, "model", "models/gpt-a-cat-cpu.ckpt", "checkpoint predictord serves")
	fs.StringVar(&o.setup.Precision, "precision", "int8", "predictord's arithmetic, and the reference's: fp32, bf16 or int8")
	fs.IntVar(&o.setup.Cells, "cells", 16, "the recording's first N quality cells are served")
	fs.Float64Var(&o.setup.Seconds, "seconds", 30, "each schedule plays S seconds at real time after the history")
	fs.IntVar(&o.schedules, "schedules", 100, "number of schedules (seeds --seed, --seed+1, ...)")
	fs.DurationVar(&o.soak, "soak", 0, "run schedules until this long has passed instead of --schedules (a bounded soak)")
	fs.Uint64Var(&o.seed, "seed", 1, "first schedule's seed")
	fs.StringVar(&o.faults, "faults", "all", "fault kinds drawn from, comma-separated (all: every kind; none: an undisturbed run)")
	fs.IntVar(&o.instances, "instances", 2, "predictord instances in the group")
	fs.DurationVar(&o.ttl, "ttl", 60*time.Millisecond, "the group's lease TTL (predictord --standby-ttl)")
	fs.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "nemesis"), "work folder: binaries, and the logs of failed schedules (seed-N)")
	fs.StringVar(&o.setup.Record, "record", "",
		"flight recorder: every instance records into this stream (predictord --record), adds kill-record-leader, audits each recording (empty: off)")
	fs.BoolVar(&o.setup.AuthKeys, "auth-keys", false,
		"message authentication: fresh keys for the device and the group, every instance with predictord --auth-keys, the device signing, the audit checking")
	fs.StringVar(&o.json, "json", "", "write every verdict and the summary to this JSON file")
	if err := cli.NoArgs(fs, args); err != nil {
		return nil, err
	}
	if o.schedules < 1 && o.soak <= 0 {
		return nil, errors.New("--schedules must be at least 1 (or give --soak)")
	}
	if o.instances < 2 || o.instances > 3 {
		return nil, fmt.Errorf("--instances %d: want 2 or 3", o.instances)
	}
	if o.setup.Seconds < 5 {
		return nil, fmt.Errorf("--seconds %v: want at least 5", o.setup.Seconds)
	}
	o.setup.Bin = filepath.Join(o.dir, "bin")
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	kinds, err := nemesis.ParseKinds(o.faults, o.setup.Record != "")
	if err != nil {
		return fmt.Errorf("--faults: %w", err)
	}
	fmt.Fprintf(stderr, "nemesis: building and rolling out the reference (%d cells, %.0f s)\n", o.setup.Cells, o.setup.Seconds)
	cfg, err := nemesis.Prepare(ctx, o.setup)
	if err != nil {
		return err
	}
	cfg.Instances, cfg.TTL, cfg.Kinds, cfg.Dir, cfg.Log = o.instances, o.ttl, kinds, o.dir, stderr
	fmt.Fprintf(stderr, "nemesis: reference holds %d decisions\n", cfg.Ref.Decisions())
	var vs []*nemesis.Verdict
	start := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		if o.soak > 0 && time.Since(start) >= o.soak || o.soak <= 0 && i >= o.schedules {
			break
		}
		v := nemesis.Run(ctx, *cfg, o.seed+uint64(i))
		if ctx.Err() != nil {
			break // an interrupted schedule says nothing
		}
		fmt.Fprint(stdout, v)
		vs = append(vs, v)
	}
	sum := nemesis.Summarise(vs)
	fmt.Fprintln(stdout)
	sum.WriteTable(stdout)
	if o.json != "" {
		if err := evaluation.WriteJSON(o.json, struct {
			Verdicts []*nemesis.Verdict `json:"verdicts"`
			Summary  *nemesis.Summary   `json:"summary"`
		}{vs, sum}); err != nil {
			return err
		}
	}
	if len(sum.Failed) > 0 {
		return fmt.Errorf("%d of %d schedules failed (seeds %v)", len(sum.Failed), sum.Schedules, sum.Failed)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Exit("nemesis", run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
