package main

import (
	"context"
	"flag"
	"fmt"
	"rgcpred/base/cli"
	"rgcpred/evaluation"
	"sort"
	"strconv"
	"strings"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rgc/synth"

	"gonum.org/v1/gonum/floats"
)

// runGLM implements `trainer glm`: fit the classical GLM baseline to a
// recording and score it.
func runGLM(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer glm", flag.ContinueOnError)
	def := glm.DefaultOptions()
	data := fs.String("data", "", "recording directory (required)")
	outPath := fs.String("out", "", "write the fitted model here as JSON, in the format of a synthetic recording's truth.json (required)")
	reportPath := fs.String("report", "",
		"also write the fit's report as JSON here: per-cell scores and basis weights, which eval --glm reads")
	cellsSel := fs.String("cells", "quality", "cells to fit: quality, all or comma-separated cluster ids")
	minLag := fs.Int("min-lag", def.MinLag, "first lag (bins) of the stimulus filters; below 36 the exact oracle is not computed")
	stimBases := fs.Int("stim-bases", def.StimBases, "raised-cosine bumps per LED")
	stimLastPeak := fs.Float64("stim-last-peak", def.StimLastPeak, "lag after --min-lag of the last stimulus bump's peak (bins)")
	alphas := fs.String("alphas", joinFloats(def.Alphas),
		"L2 penalties to try (comma-separated); each cell keeps the best on the validation split")
	workers := fs.Int("workers", 0, "cells fitted in parallel (0: all cores)")
	nllSplits := fs.String("nll-splits", "val,test",
		"splits on which to score the fitted model's exact next-spike NLL over every window (comma-separated, or none)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer glm --data DIR --out FILE.json [flags]\n"+
			"\n"+
			"Fit a generalised linear model (raised-cosine stimulus and spike-history filters,\n"+
			"exponential nonlinearity; Pillow et al. 2008) to every cell on the training split,\n"+
			"and score it with the exact oracle of rgc/synth. Evaluate it further with\n"+
			"`trainer eval --glm FILE.json`.")
		fs.PrintDefaults()
	}
	stim := stimFlag(fs)
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *data == "" || *outPath == "" {
		return cli.Usagef(fs, "--data and --out are required")
	}
	opts := def
	opts.MinLag, opts.Workers = *minLag, *workers
	opts.StimBases, opts.StimLastPeak = *stimBases, *stimLastPeak
	opts.Alphas = nil
	for _, f := range cli.List(*alphas) {
		a, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return fmt.Errorf("--alphas %q: %w", *alphas, err)
		}
		opts.Alphas = append(opts.Alphas, a)
	}
	var splits []rgc.Split
	if *nllSplits != "none" && *nllSplits != "" {
		for _, f := range cli.List(*nllSplits) {
			s, err := rgc.ParseSplit(f)
			if err != nil {
				return fmt.Errorf("--nll-splits: %w", err)
			}
			splits = append(splits, s)
		}
	}
	rec, cells, err := loadCells(*data, *cellsSel, *stim)
	if err != nil {
		return err
	}
	truth, rep, err := glm.Fit(ctx, rec, cells, opts)
	if err != nil {
		return err
	}
	if err := glm.SaveTruth(*outPath, truth); err != nil {
		return err
	}
	if *reportPath != "" {
		if err := evaluation.WriteJSON(*reportPath, rep); err != nil {
			return err
		}
	}
	printGLMReport(rec, rep)

	if len(splits) == 0 {
		return nil
	}
	if opts.MinLag < synth.MinLatencyBins {
		fmt.Printf("exact NLL not computed: --min-lag %d < %d lets more than one future frame reach the horizon\n",
			opts.MinLag, synth.MinLatencyBins)
		return nil
	}
	p, err := glm.NewPredictor(rec, truth)
	if err != nil {
		return err
	}
	fmt.Printf("next-spike NLL (nats, every window, mean over %d cells): glm vs zero-input (per-cell training class frequencies)\n",
		len(cells))
	for _, s := range splits {
		start := time.Now()
		res, err := synth.BayesNLL(ctx, p.Oracle(), rec, s, cells)
		if err != nil {
			return fmt.Errorf("score %s: %w", s, err)
		}
		zero := make([]float64, len(cells))
		for j, c := range cells {
			one := []int{c}
			zero[j] = synth.FixedNLL(rec, s, one, synth.ClassFrequencies(rec, rgc.Train, one)).NLL
		}
		fmt.Printf("  %-5s glm %.4f  zero %.4f  (glm better on %d of %d cells; %d windows per cell; %.0f s)\n",
			s, mean(res.PerCell), mean(zero), countBelow(res.PerCell, zero), len(cells), res.Windows/len(cells), time.Since(start).Seconds())
	}
	return nil
}

// printGLMReport prints a fit's summary.
func printGLMReport(rec *rgc.Recording, rep *glm.Report) {
	n := len(rep.Cells)
	fmt.Printf("glm: %s, %d cells, %d parameters per cell (stimulus filters %d bins from lag %d, history %d bins), fitted in %.1f s\n",
		rec.Name, n, rep.Params, rep.StimBins, rep.Options.MinLag, rep.HistBins, rep.Seconds)
	count := map[float64]int{}
	var train, val, test, cval []float64
	for _, c := range rep.Cells {
		count[c.Alpha]++
		train, val, test, cval = append(train, c.TrainNLL), append(val, c.ValNLL), append(test, c.TestNLL), append(cval, c.ConstValNLL)
	}
	alphas := make([]float64, 0, len(count))
	for a := range count {
		alphas = append(alphas, a)
	}
	sort.Float64s(alphas)
	var parts []string
	for _, a := range alphas {
		parts = append(parts, fmt.Sprintf("%g: %d cells", a, count[a]))
	}
	fmt.Printf("L2 penalty chosen on val: %s\n", strings.Join(parts, ", "))
	fmt.Printf("per-bin NLL (mnats/bin, mean over cells): train %.3f  val %.3f  test %.3f  (constant rate on val: %.3f)\n",
		1000*mean(train), 1000*mean(val), 1000*mean(test), 1000*mean(cval))
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return floats.Sum(x) / float64(len(x))
}

func countBelow(a, b []float64) int {
	n := 0
	for i := range a {
		if a[i] < b[i] {
			n++
		}
	}
	return n
}

func joinFloats(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
