package main

import (
	"context"
	"flag"
	"fmt"

	"rgcpred/base/cli"
	"rgcpred/model"
	"rgcpred/model/torchmap"
	"rgcpred/rgc"
)

// runExport implements `trainer export`: a checkpoint to safetensors in the
// PyTorch reference module's layout (docs/interop.md).
func runExport(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer export", flag.ContinueOnError)
	ckpt := fs.String("ckpt", "", "checkpoint to export")
	out := fs.String("out", "", "safetensors file to write")
	probe := fs.String("probe", "",
		"also write real windows with the Go engine's outputs to this safetensors file (for tools/torchcheck.py)")
	data := fs.String("data", "", "recording the --probe windows come from")
	probeN := fs.Int("probe-windows", 16, "number of --probe windows (test split)")
	stim := stimFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer export --ckpt M.ckpt --out M.safetensors [--probe P.safetensors --data DIR]\n"+
			"\n"+
			"Write a checkpoint's weights as safetensors under the PyTorch module names of\n"+
			"torchref.py's SpikeModel (config, cell ids and provenance in the metadata).")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *ckpt == "" || *out == "" || (*probe != "") != (*data != "") {
		return cli.Usagef(fs, "--ckpt and --out are required; --probe and --data go together")
	}
	ck, err := model.LoadCheckpoint(*ckpt)
	if err != nil {
		return err
	}
	f, err := torchmap.Export(ck)
	if err != nil {
		return err
	}
	if err := f.WriteFile(*out); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d tensors of %s (%s)\n", *out, len(f.Tensors), ck.Weights.Config.Name(), torchmap.TorchModule(ck.Weights.Config))
	if *probe == "" {
		return nil
	}
	rec, err := rgc.LoadMode(*data, *stim)
	if err != nil {
		return err
	}
	p, err := torchmap.Probe(ck, rec, *probeN)
	if err != nil {
		return err
	}
	if err := p.WriteFile(*probe); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d windows of %s with the Go engine's outputs\n", *probe, *probeN, rec.Name)
	return nil
}
