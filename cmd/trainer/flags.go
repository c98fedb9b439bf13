package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"

	"rgcpred/model/train"
	"rgcpred/rgc"
)

// shippedConfig is the architecture of the shipped model
// (models/gpt-a-cat-cpu.ckpt, what predictord serves by default): the
// default of train, lr-find and model.
const shippedConfig = "gpt-a-cat-cpu"

// stimFlag registers --stim, the stimulus mode recordings are binned in.
func stimFlag(fs *flag.FlagSet) *rgc.StimMode {
	m := new(rgc.StimMode)
	fs.TextVar(m, "stim", rgc.StimCausal,
		"stimulus binning: causal or zero-phase (non-causal, sees 16 bins ahead); a model reads only its own (docs/data.md)")
	return m
}

// loadCells loads the recording in dir binned in stimulus mode mode and
// resolves a --cells value (rgc.Recording.SelectCells) to indices into its Cells;
// no cell is an error.
func loadCells(dir, sel string, mode rgc.StimMode) (*rgc.Recording, []int, error) {
	rec, err := rgc.LoadMode(dir, mode)
	if err != nil {
		return nil, nil, err
	}
	cells, err := rec.SelectCells(sel)
	if err != nil {
		return nil, nil, fmt.Errorf("--cells: %w", err)
	}
	return rec, cells, nil
}

// precisionFlag registers --precision, the arithmetic of the training
// GEMMs (train.Precision).
func precisionFlag(fs *flag.FlagSet) *train.Precision {
	p := new(train.Precision)
	*p = train.PrecisionAuto
	fs.Func("precision",
		"training GEMMs: auto (fp32: the faster on every CPU measured), fp32 or bf16 (slower; emulated without AVX512_BF16); a resume keeps its own",
		func(v string) error {
			q, err := train.ParsePrecision(v)
			*p = q
			return err
		})
	return p
}

// emaFlag registers --ema, the decay of the moving average of the weights
// (train.Options.EMA), checked as it is parsed.
func emaFlag(fs *flag.FlagSet) *float64 {
	d := new(float64)
	fs.Func("ema",
		"average the weights with this `DECAY` in (0, 1), e.g. 0.999; validation, early stopping and the best checkpoint use the average (0: off)",
		func(v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("EMA decay %q is not a number", v)
			}
			if err := train.CheckEMADecay(x); err != nil {
				return err
			}
			*d = x
			return nil
		})
	return d
}

// profileFlag registers --cpuprofile: a Go CPU profile of the command
// (`go tool pprof -top bin/trainer FILE`), written when it returns.
func profileFlag(fs *flag.FlagSet) *string {
	return fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
}

// startProfile starts the CPU profile named by --cpuprofile (none when
// path is empty) and returns the function that ends and writes it.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// replicasFlag registers --replicas, the data-parallel replicas of the
// training graph (train.Replicas).
func replicasFlag(fs *flag.FlagSet) *int {
	return fs.Int("replicas", 0,
		"data-parallel replicas sharing --threads, each with its share of the batch and its own batch-norm statistics (0: one per thread)")
}
