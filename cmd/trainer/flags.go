package main

import (
	"flag"
	"fmt"

	"rgcpred/base/cli"
	"rgcpred/model/train"
	"rgcpred/rgc"
)

// parseNoArgs parses args into fs and rejects positional arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

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
		"training GEMMs: auto (bf16 with AVX512_BF16, else fp32), fp32 or bf16 (emulated elsewhere, slower); a resume keeps its own",
		func(v string) error {
			q, err := train.ParsePrecision(v)
			*p = q
			return err
		})
	return p
}
