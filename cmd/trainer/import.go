package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"rgcpred/base/cli"
	"rgcpred/model/safetensors"
	"rgcpred/model/torchmap"
	"rgcpred/rgc"
)

// runImport implements `trainer import`: safetensors written by PyTorch (or
// `trainer export`) to a checkpoint the daemon serves (docs/interop.md).
func runImport(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer import", flag.ContinueOnError)
	in := fs.String("in", "", "safetensors file: a SpikeModel state_dict")
	out := fs.String("out", "", "checkpoint to write")
	ids := fs.String("cell-ids", "", "cluster id of each embedding row, comma-separated (default: the file's metadata, or --data)")
	data := fs.String("data", "", "recording whose --cells give the embedding rows' cluster ids, in recording order")
	cells := fs.String("cells", "quality", "with --data: quality, all or comma-separated cluster ids")
	heads := fs.Int("heads", 0, "attention heads (default: the metadata's, else 4 as in torchref.py)")
	binRate := fs.Float64("bin-rate-hz", 0, "bin rate the weights were trained at (default: the metadata's, else rgc.BinRateHz)")
	notes := fs.String("notes", "", "provenance notes (default: the metadata's, else where the file came from)")
	stim := fs.String("stim", "",
		"stimulus mode the model is for, causal or zero-phase; the file's must match (default: causal with --data, else unchecked)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer import --in M.safetensors --out M.ckpt [--cell-ids 13,14,... | --data DIR [--cells quality]]\n"+
			"\n"+
			"Convert a PyTorch state_dict of torchref.py's SpikeModel, saved as safetensors,\n"+
			"into a checkpoint (configuration inferred from the tensor shapes).")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return cli.Usagef(fs, "--in and --out are required")
	}
	if *ids != "" && *data != "" {
		return errors.New("give --cell-ids or --data, not both")
	}
	opt := torchmap.Options{Heads: *heads, BinRateHz: *binRate}
	input := rgc.StimCausal
	if *stim != "" {
		m, err := rgc.ParseStimMode(*stim)
		if err != nil {
			return fmt.Errorf("--stim: %w", err)
		}
		input = m
	}
	if *stim != "" || *data != "" {
		opt.Input = &input
	}
	if *ids != "" {
		var err error
		if opt.CellIDs, err = cli.Ints(*ids); err != nil {
			return fmt.Errorf("--cell-ids: %w", err)
		}
	}
	if *data != "" {
		rec, sel, err := loadCells(*data, *cells, input)
		if err != nil {
			return err
		}
		for _, i := range sel {
			opt.CellIDs = append(opt.CellIDs, rec.Cells[i].ClusterID)
		}
		opt.Provenance.Data = *data
	}
	f, err := safetensors.ReadFile(*in)
	if err != nil {
		return err
	}
	if *notes != "" || opt.Provenance.Data != "" {
		opt.Provenance.Notes = *notes
		if opt.Provenance.Notes == "" {
			opt.Provenance.Notes = "imported from " + *in
		}
	}
	ck, err := torchmap.Import(f, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if err := ck.Save(*out); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s, %d cells, %s stimulus\n", *out, ck.Weights.Config.Name(), len(ck.CellIDs), ck.StimMode)
	return nil
}
