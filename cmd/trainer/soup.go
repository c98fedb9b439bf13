package main

import (
	"context"
	"flag"
	"fmt"

	"rgcpred/base/cli"
	"rgcpred/model"
)

// runSoup implements `trainer soup`: the uniform weight average of
// checkpoints fine-tuned from one parent (model.Soup).
func runSoup(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer soup", flag.ContinueOnError)
	ckpts := fs.String("ckpt", "", "comma-separated checkpoints to average (same config, cells and stimulus mode)")
	out := fs.String("out", "", "checkpoint to write")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer soup --ckpt A.ckpt,B.ckpt[,...] --out SOUP.ckpt\n"+
			"\n"+
			"Average the weights of checkpoints fine-tuned from one parent (a model soup);\n"+
			"score the result with trainer eval --split val before using it.")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	paths := cli.List(*ckpts)
	if len(paths) < 2 || *out == "" {
		return cli.Usagef(fs, "--ckpt needs at least two checkpoints; --out is required")
	}
	cks := make([]*model.Checkpoint, len(paths))
	for i, p := range paths {
		ck, err := model.LoadCheckpoint(p)
		if err != nil {
			return err
		}
		cks[i] = ck
	}
	s, err := model.Soup(cks)
	if err != nil {
		return err
	}
	s.Provenance.Notes = fmt.Sprintf("soup of %q", paths)
	if err := s.Save(*out); err != nil {
		return err
	}
	fmt.Printf("wrote %s: the average of %d checkpoints of %s, %d cells\n", *out, len(cks), s.Weights.Config.Name(), len(s.CellIDs))
	return nil
}

// runCut implements `trainer cut`: a checkpoint re-cut to a subset of its
// cells (model.Checkpoint.WithCells), e.g. a model trained on every
// cluster served on the quality cells only.
func runCut(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trainer cut", flag.ContinueOnError)
	ckpt := fs.String("ckpt", "", "checkpoint to cut")
	out := fs.String("out", "", "checkpoint to write")
	data := fs.String("data", "data/chicken-17-08-21", "recording the cells are chosen from")
	cells := fs.String("cells", "quality", "cells to keep: quality, all or comma-separated cluster ids")
	stim := stimFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer cut --ckpt IN.ckpt --out OUT.ckpt [--cells quality]\n"+
			"\n"+
			"Keep only some of a checkpoint's cells (their embedding rows); every other\n"+
			"weight is shared by all cells and kept. Every kept cell must be in the checkpoint.")
		fs.PrintDefaults()
	}
	if err := cli.NoArgs(fs, args); err != nil {
		return err
	}
	if *ckpt == "" || *out == "" {
		return cli.Usagef(fs, "--ckpt and --out are required")
	}
	ck, err := model.LoadCheckpoint(*ckpt)
	if err != nil {
		return err
	}
	rec, idx, err := loadCells(*data, *cells, *stim)
	if err != nil {
		return err
	}
	ids := make([]int, len(idx))
	for i, k := range idx {
		ids[i] = rec.Cells[k].ClusterID
	}
	w, added, err := ck.WithCells(ids)
	if err != nil {
		return err
	}
	if added > 0 {
		return fmt.Errorf("%s: %d of the %d cells to keep are not in it", *ckpt, added, len(ids))
	}
	n := len(ck.CellIDs)
	ck.Weights, ck.CellIDs, ck.TrainState = w, ids, nil
	// The recorded scores were over the old cells.
	ck.Provenance.Notes = fmt.Sprintf("%s; cut from %d to %d cells (%s); validation NLL %.4f was over the %d",
		ck.Provenance.Notes, n, len(ids), *cells, ck.Provenance.ValNLL, n)
	ck.Provenance.ValNLL, ck.Provenance.ZeroInputNLL = 0, 0
	if err := ck.Save(*out); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s on %d of its %d cells (%s mode)\n", *out, w.Config.Name(), len(ids), n, ck.StimMode)
	return nil
}
