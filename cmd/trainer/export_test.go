package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/safetensors"
	"rgcpred/model/torchmap"
	"rgcpred/rgc"
)

const shippedModel = "../../models/gpt-a-cat-cpu.ckpt"

// TestExportImportCLI round-trips the shipped model through `trainer
// export` and `trainer import` and checks the result bit for bit.
func TestExportImportCLI(t *testing.T) {
	dir := t.TempDir()
	st, probe, back := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "p.safetensors"), filepath.Join(dir, "m.ckpt")
	ctx := context.Background()
	if err := runExport(ctx, []string{"--ckpt", shippedModel, "--out", st, "--probe", probe, "--data", shippedDir, "--probe-windows", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := runImport(ctx, []string{"--in", st, "--out", back}); err != nil {
		t.Fatal(err)
	}
	orig, err := model.LoadCheckpoint(shippedModel)
	if err != nil {
		t.Fatal(err)
	}
	got, err := model.LoadCheckpoint(back)
	if err != nil {
		t.Fatal(err)
	}
	orig.TrainState = nil
	if !got.Equal(orig) {
		t.Fatal("export -> import changed the shipped checkpoint")
	}
	p, err := safetensors.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	if in := p.Tensor(torchmap.ProbeInput); in == nil || in.Shape[0] != 2 {
		t.Fatalf("probe input %+v", in)
	}

	// A metadata-free file needs cell ids; --cell-ids and --data give them.
	// Without metadata it is a PyTorch file of the reference pipeline,
	// zero-phase: importing it for causal data (--data's default) is
	// refused, naming both modes.
	f, err := safetensors.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	f.Metadata = nil
	bare := filepath.Join(dir, "bare.safetensors")
	if err := f.WriteFile(bare); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string // "" for success
	}{
		{"no ids", []string{"--in", bare, "--out", back}, "cluster id of each of the 60"},
		{"bad ids", []string{"--in", bare, "--out", back, "--cell-ids", "1,x"}, "--cell-ids"},
		{"too few ids", []string{"--in", bare, "--out", back, "--cell-ids", "1,2"}, "2 cell ids for 60"},
		{"both", []string{"--in", bare, "--out", back, "--cell-ids", "1", "--data", shippedDir}, "not both"},
		{"data, causal", []string{"--in", bare, "--out", back, "--data", shippedDir}, "trained on zero-phase"},
		{"bad mode", []string{"--in", bare, "--out", back, "--data", shippedDir, "--stim", "ahead"}, "--stim"},
		{"data, zero-phase", []string{"--in", bare, "--out", back, "--data", shippedDir, "--stim", "zero-phase"}, ""},
	}
	for _, tc := range cases {
		err := runImport(ctx, tc.args)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	got, err = model.LoadCheckpoint(back)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.CellIDs, orig.CellIDs) || got.StimMode != rgc.StimZeroPhase {
		t.Errorf("--data quality gave cell ids %v (want the model's %v), mode %v (want zero-phase)", got.CellIDs, orig.CellIDs, got.StimMode)
	}
}
