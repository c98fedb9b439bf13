package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gonum.org/v1/gonum/floats"

	"rgcpred/base/cli"
	"rgcpred/base/cputime"
	"rgcpred/model"
	"rgcpred/model/train"
)

func runBench(ctx context.Context, args []string) (err error) {
	fs := cli.NewFlagSet("trainer bench", "[flags]",
		"Time training steps of ours and of the PyTorch reference, alternating rounds, and print the ratio.")
	configs := fs.String("configs", "gpt-a-cat-cpu,gpt-a-cat", "configurations to time, comma-separated")
	batch := fs.Int("batch", 64, "batch size")
	threads := fs.Int("threads", 2, "compute goroutines (and PyTorch threads)")
	replicas := replicasFlag(fs)
	cells := fs.Int("cells", 60, "cells (rows of the cell embedding)")
	steps := fs.Int("steps", 10, "timed training steps per round, ours and PyTorch's")
	rounds := fs.Int("rounds", 3, "rounds per configuration, ours and PyTorch's alternating")
	python := fs.String("python", "/usr/bin/python3", "Python with PyTorch")
	torchref := fs.String("torchref", "../shared/tools/torchref.py", "PyTorch reference script; empty: time ours alone")
	precision := precisionFlag(fs)
	profile := profileFlag(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	stopProfile, err := startProfile(*profile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	if *steps < 1 || *rounds < 1 || *batch < 1 || *threads < 1 {
		return fmt.Errorf("--steps, --rounds, --batch and --threads must be at least 1")
	}
	if p := precision.Resolve(); p == train.PrecisionBF16 {
		fmt.Printf("training GEMMs in bf16 (%s)\n", p.Path())
	}
	for _, name := range strings.Split(*configs, ",") {
		c, err := model.ParseConfigName(strings.TrimSpace(name), *cells)
		if err != nil {
			return err
		}
		b, err := train.NewStepBench(c, *batch, *threads, *replicas, 1, *precision)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		defer b.Close()
		// torchref.py has the paper CNN only.
		peer := *torchref != "" && c.CNNPreset() == model.CNNPaper
		var ours, cpuRates, cores, theirs, ratios []float64
		for r := 1; r <= *rounds; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			o, err := b.Rate(*steps)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Name(), err)
			}
			ours, cpuRates, cores = append(ours, o.PerSec), append(cpuRates, o.PerCPUSec), append(cores, o.Cores)
			line := fmt.Sprintf("%s round %d: ours %.1f samples/s (%.1f per CPU-second, %.2f cores busy, load %.1f)", c.Name(), r, o.PerSec, o.PerCPUSec, o.Cores, cputime.LoadAvg())
			if peer {
				p, err := train.TorchTrainRate(ctx, *python, *torchref, c.Stem, *batch, *threads, *steps)
				if err != nil {
					return err
				}
				theirs, ratios = append(theirs, p), append(ratios, o.PerSec/p)
				line += fmt.Sprintf(", pytorch %.1f samples/s, ratio %.2f", p, o.PerSec/p)
			}
			fmt.Println(line)
		}
		sum := fmt.Sprintf("%s: batch %d, %d threads, %d replica(s), median of %d rounds of %d steps: ours %.1f samples/s (%.1f per CPU-second, %.2f cores busy)",
			c.Name(), *batch, *threads, b.Replicas, *rounds, *steps, median(ours), median(cpuRates), median(cores))
		if peer {
			sum += fmt.Sprintf(", pytorch %.1f samples/s, ratio %.2f (per round %.2f-%.2f)", median(theirs), median(ratios), floats.Min(ratios), floats.Max(ratios))
		} else if *torchref != "" {
			sum += " (no PyTorch peer: torchref.py has the paper CNN only)"
		}
		fmt.Println(sum)
	}
	return nil
}

// median is the middle of x (the mean of the middle two for even lengths).
func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
