package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"rgcpred/model"
)

// TestCutSoupCLI cuts the shipped model to three cells, averages the cut
// with itself (a soup of equal models is the model) and checks that a cut
// to a cell the model lacks is refused.
func TestCutSoupCLI(t *testing.T) {
	dir := t.TempDir()
	cut, soup := filepath.Join(dir, "cut.ckpt"), filepath.Join(dir, "soup.ckpt")
	orig, err := model.LoadCheckpoint(shippedModel)
	if err != nil {
		t.Fatal(err)
	}
	ids := orig.CellIDs[:3]
	ctx := context.Background()
	spec := []string{"--ckpt", shippedModel, "--out", cut, "--data", shippedDir,
		"--cells", fmt.Sprintf("%d,%d,%d", ids[0], ids[1], ids[2])}
	if err := runCut(ctx, spec); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadCheckpoint(cut)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Weights.Config.Width()
	if !slices.Equal(c.CellIDs, ids) || c.StimMode != orig.StimMode ||
		!slices.Equal(c.Weights.Get(model.ParamCellEmb), orig.Weights.Get(model.ParamCellEmb)[:3*d]) {
		t.Fatalf("cut: cells %v (want %v), mode %s (want %s), or embedding rows changed", c.CellIDs, ids, c.StimMode, orig.StimMode)
	}
	if err := runSoup(ctx, []string{"--ckpt", cut + "," + cut, "--out", soup}); err != nil {
		t.Fatal(err)
	}
	s, err := model.LoadCheckpoint(soup)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range c.Weights.Tensors {
		if !slices.Equal(v, s.Weights.Tensors[name]) {
			t.Fatalf("soup of a model with itself changed %s", name)
		}
	}
	// The shipped recording has more clusters than the model's cells.
	if err := runCut(ctx, []string{"--ckpt", cut, "--out", filepath.Join(dir, "x.ckpt"), "--data", shippedDir, "--cells", "all"}); err == nil {
		t.Error("want an error cutting to cells the checkpoint lacks")
	}
}
