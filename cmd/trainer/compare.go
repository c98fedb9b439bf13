package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"

	"rgcpred/base/cli"
	"rgcpred/evaluation"
	"rgcpred/rgc"
)

// runCompare implements `trainer compare`: the paired comparison of two
// models scored in separate `trainer eval --json` runs, e.g. each with spike
// thresholds of its own, one report per training seed.
func runCompare(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer compare", flag.ContinueOnError)
	a := fs.String("a", "", "eval reports of model A, comma-separated: one per training seed")
	b := fs.String("b", "", "eval reports of model B, comma-separated: one per training seed")
	modelA := fs.String("a-model", "", "model A's name in its reports, or names comma-separated, one per report (default: their only model)")
	modelB := fs.String("b-model", "", "model B's name in its reports, or names comma-separated, one per report (default: their only model)")
	resamples := fs.Int("resamples", 2000, "bootstrap resamples (at least 2000)")
	seed := fs.Uint64("seed", 1, "bootstrap seed")
	zero := fs.String("zero", "",
		"eval report holding the zero-input baseline on the same split (e.g. scored by the median rule: silence); required when a side uses a threshold policy")
	zeroModel := fs.String("zero-model", "zero", "the zero-input baseline's name in the --zero report")
	blockSeconds := fs.Float64("block-seconds", 0,
		"time blocks of the block x cell bootstrap, a whole multiple of the reports' (trainer eval --block-seconds); 0: the reports' own, if any")
	out := fs.String("json", "", "write the comparison as JSON to this file (with --zero, the list of the three)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer compare --a A1.json[,A2.json,...] --b B.json [flags]\n"+
			"\n"+
			"Paired per-cell differences A - B of models scored in separate trainer eval --json\n"+
			"runs on the same split and rollout (the spike policy may differ: each model's own\n"+
			"thresholds). Several reports of a model are its seeds: the interval is over cells\n"+
			"of the seed-averaged differences, with each seed's own paired IQM and sign agreement.\n"+
			"With --zero, A and B are each also compared with the zero-input baseline.")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *a == "" || *b == "" {
		return cli.Usagef(fs, "--a and --b are required")
	}
	if *resamples < 2000 {
		return fmt.Errorf("--resamples %d: at least 2000", *resamples)
	}
	side := func(files, name string) (*evaluation.SeedSet, error) {
		var reps []*evaluation.Report
		for _, f := range cli.List(files) {
			r, err := evaluation.ReadReport(f)
			if err != nil {
				return nil, err
			}
			reps = append(reps, r)
		}
		set, err := evaluation.Seeds(reps, cli.List(name)...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", files, err)
		}
		return set, nil
	}
	sa, err := side(*a, *modelA)
	if err != nil {
		return err
	}
	sb, err := side(*b, *modelB)
	if err != nil {
		return err
	}
	sets := []*evaluation.SeedSet{sa, sb}
	if *zero != "" {
		sz, err := side(*zero, *zeroModel)
		if err != nil {
			return err
		}
		sets = append(sets, sz)
	}
	if *blockSeconds != 0 {
		for _, s := range sets {
			if err := coarsenBlocks(s, *blockSeconds); err != nil {
				return err
			}
		}
	}
	sca, scb := sa.Scoring, sb.Scoring
	if *zero == "" && (strings.HasPrefix(sca.Policy, "threshold:") || strings.HasPrefix(scb.Policy, "threshold:")) {
		return errors.New("a threshold policy's table shows zero-input beside both models: give --zero REPORT, an eval report of the zero-input baseline on the same split")
	}
	pairs := [][2]*evaluation.SeedSet{{sa, sb}}
	if len(sets) == 3 {
		pairs = append(pairs, [2]*evaluation.SeedSet{sa, sets[2]}, [2]*evaluation.SeedSet{sb, sets[2]})
	}
	var cs []evaluation.Comparison
	for _, p := range pairs {
		c, err := evaluation.CompareSets(p[0], p[1], *resamples, *seed)
		if err != nil {
			return err
		}
		cs = append(cs, *c)
	}
	fmt.Printf("%s, split %s, rollout bins [%d, %d); A: policy %s; B: policy %s\n", sca.Recording, sca.Split, sca.Bins[0], sca.Bins[1], sca.Policy, scb.Policy)
	evaluation.PrintComparisons(cli.Stdout, cs)
	if *out == "" {
		return nil
	}
	if len(cs) == 1 {
		return evaluation.WriteJSON(*out, cs[0])
	}
	return evaluation.WriteJSON(*out, cs)
}

// coarsenBlocks merges a set's time blocks into blocks of seconds, a whole
// multiple of the blocks it was scored in.
func coarsenBlocks(s *evaluation.SeedSet, seconds float64) error {
	have := s.Scoring.BlockBins
	if have == 0 {
		return fmt.Errorf("--block-seconds: %s was scored without time blocks (trainer eval --block-seconds)", s.Name)
	}
	k := int(math.Round(seconds * rgc.BinRateHz / float64(have)))
	if k < 1 || math.Abs(float64(k*have)-seconds*rgc.BinRateHz) > 0.5 {
		return fmt.Errorf("--block-seconds %g: not a whole multiple of %s's %g s blocks", seconds, s.Name, s.Scoring.BlockSeconds())
	}
	s.MergeBlocks(k)
	return nil
}
