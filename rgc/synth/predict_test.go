package synth

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/rgc"
)

func TestPredictMatchesProbs(t *testing.T) {
	_, tr, rec, o := generate(t, Config{Cells: 3, Minutes: 2, Seed: 8})
	refs := []rgc.WindowRef{}
	for c := range rec.Cells {
		sb := rec.Cells[c].SpikeBins
		// Windows right after spikes (history matters) and a plain one.
		for _, q := range sb[10:13] {
			refs = append(refs, rgc.WindowRef{Cell: c, T: int(q) + 1})
		}
		refs = append(refs, rgc.WindowRef{Cell: c, T: 5000 + 100*c})
	}
	var b rgc.Batch
	rec.FillBatch(refs, &b, nil)
	out := make([]float32, len(refs)*rgc.NumClasses)
	if err := o.Predict(&b, out); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, rgc.NumClasses)
	for i, w := range refs {
		if err := o.Probs(w.Cell, w.T, rec.Cells[w.Cell].SpikeBins, want); err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for k, p := range out[i*rgc.NumClasses : (i+1)*rgc.NumClasses] {
			sum += float64(p)
			if math.Abs(float64(p)-want[k]) > 1e-6 {
				t.Fatalf("window %d class %d: Predict %g, Probs %g", i, k, p, want[k])
			}
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("window %d: float32 probabilities sum to %g", i, sum)
		}
	}

	// Rollout: the spike row holds generated spikes, not the recorded ones.
	// Put a single spike 2 bins before the end of window 0 and none
	// elsewhere: the oracle must use exactly that history.
	row := b.Inputs[rgc.SpikeRow*rgc.WindowBins : (rgc.SpikeRow+1)*rgc.WindowBins]
	clear(row)
	row[rgc.WindowBins-3] = 1
	if err := o.Predict(&b, out); err != nil {
		t.Fatal(err)
	}
	gen := []int32{int32(refs[0].T - 2)}
	if err := o.Probs(refs[0].Cell, refs[0].T, gen, want); err != nil {
		t.Fatal(err)
	}
	recorded := out[:rgc.NumClasses]
	for k := range want {
		if math.Abs(float64(recorded[k])-want[k]) > 1e-6 {
			t.Fatalf("rollout window class %d: Predict %g, Probs with the generated spike %g", k, recorded[k], want[k])
		}
	}
	// The refractory dip right after the generated spike: bin T+1 lies 3
	// bins after it, so its intensity is the spike-free one times exp(h[3]).
	free := make([]float64, rgc.NumClasses)
	if err := o.Probs(refs[0].Cell, refs[0].T, nil, free); err != nil {
		t.Fatal(err)
	}
	h3 := tr.Cells[refs[0].Cell].HistFilter[2]
	ratio := math.Log1p(-want[0]) / math.Log1p(-free[0])
	if h3 > -1 || math.Abs(ratio-math.Exp(h3)) > 1e-9*math.Exp(h3) {
		t.Errorf("intensity 3 bins after a spike / without it = %g, want exp(h[3]) = %g (a refractory dip)", ratio, math.Exp(h3))
	}

	allocs := testing.AllocsPerRun(20, func() {
		if err := o.Predict(&b, out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Predict allocates %.1f times per call, want 0", allocs)
	}
}

func TestPredictErrors(t *testing.T) {
	_, _, rec, o := generate(t, Config{Cells: 2, Minutes: 1, Seed: 8})
	var b rgc.Batch
	rec.FillBatch([]rgc.WindowRef{{Cell: 0, T: 3000}}, &b, nil)
	out := make([]float32, rgc.NumClasses)
	for _, tc := range []struct {
		name  string
		edit  func(b *rgc.Batch) []float32
		match string
	}{
		{"unknown cell", func(b *rgc.Batch) []float32 { b.Cells[0] = 77; return out }, "unknown cell (cluster id 77)"},
		{"end beyond the stimulus", func(b *rgc.Batch) []float32 { b.Ends[0] = rec.Bins + 5; return out }, "outside the recording"},
		{"negative end", func(b *rgc.Batch) []float32 { b.Ends[0] = -1; return out }, "outside the recording"},
		{"stimulus from elsewhere", func(b *rgc.Batch) []float32 { b.Ends[0] = otherStim(rec, 3000); return out }, "does not come from this recording"},
		{"short output", func(b *rgc.Batch) []float32 { return out[:10] }, "output has 10 floats"},
		{"ragged batch", func(b *rgc.Batch) []float32 { b.Ends = nil; return out }, "ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bb rgc.Batch
			rec.FillBatch([]rgc.WindowRef{{Cell: 0, T: 3000}}, &bb, nil)
			dst := tc.edit(&bb)
			err := o.Predict(&bb, dst)
			if err == nil || !strings.Contains(err.Error(), tc.match) {
				t.Fatalf("got error %v, want one containing %q", err, tc.match)
			}
		})
	}
	if err := o.SetLookahead(-1); err == nil {
		t.Error("negative look-ahead accepted")
	}
}

func TestNewOracleRejectsBadInput(t *testing.T) {
	raw, tr, _, _ := generate(t, Config{Cells: 2, Minutes: 0.5, Seed: 8})
	shifted := *raw
	shifted.Triggers = append([]int64(nil), raw.Triggers...)
	shifted.Triggers[3]++
	if _, err := NewOracle(&shifted, tr); err == nil || !strings.Contains(err.Error(), "not on a bin boundary") {
		t.Errorf("triggers off bin boundaries: got %v", err)
	}
	bad := *tr
	bad.FrameLengths = []FrameLength{{50, 0.5}}
	if _, err := NewOracle(raw, &bad); err == nil || !strings.Contains(err.Error(), "sum to") {
		t.Errorf("improper frame-length distribution: got %v", err)
	}
	other := *tr
	other.Cells = tr.Cells[:1]
	if _, err := NewOracle(raw, &other); err == nil || !strings.Contains(err.Error(), "the truth has 1") {
		t.Errorf("truth of another recording: got %v", err)
	}
	other.Cells = []CellParams{tr.Cells[0], tr.Cells[1]}
	other.Cells[1].ClusterID = 9
	if _, err := NewOracle(raw, &other); err == nil || !strings.Contains(err.Error(), "the truth's is 9") {
		t.Errorf("truth with other cluster ids: got %v", err)
	}
	// Too many futures: 1-bin frames and zero latency.
	tiny := *tr
	tiny.FrameLengths = []FrameLength{{1, 0.5}, {2, 0.5}}
	tiny.Cells = []CellParams{shortCell(0, 0, 4), shortCell(1, 0, 4)}
	if _, err := NewOracle(raw, &tiny); err == nil || !strings.Contains(err.Error(), "exceed the limit") {
		t.Errorf("exploding tree: got %v", err)
	}
	// A frame longer than the truth allows.
	short := *tr
	short.FrameLengths = []FrameLength{{20, 1}}
	o, err := NewOracle(raw, &short)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]float64, rgc.NumClasses)
	if err := o.Probs(0, 2000, nil, p); err == nil || !strings.Contains(err.Error(), "longer than any frame length") {
		t.Errorf("frame longer than allowed: got %v", err)
	}
	dir := t.TempDir()
	if _, err := OracleFromDir(dir); err == nil {
		t.Error("OracleFromDir of an empty directory succeeded")
	}
	if err := raw.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := OracleFromDir(dir); err == nil || !strings.Contains(err.Error(), TruthFile) {
		t.Errorf("missing truth.json: got %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, TruthFile), []byte(`{"seed": 1, "frame_lengths": [], "cells": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OracleFromDir(dir); err == nil || !strings.Contains(err.Error(), "no frame lengths") {
		t.Errorf("empty truth: got %v", err)
	}
	if _, _, err := Generate(context.Background(), Config{Cells: 0, Minutes: 1}); err == nil {
		t.Error("0 cells accepted")
	}
	if _, _, err := Generate(context.Background(), Config{Cells: 1, Minutes: -1}); err == nil {
		t.Error("negative minutes accepted")
	}
}

// otherStim returns a bin after t whose binned stimulus differs from bin t's.
func otherStim(rec *rgc.Recording, t int) int {
	for u := t + 1; u < rec.Bins; u++ {
		for c := range rec.Stimulus {
			if math.Abs(float64(rec.Stimulus[c][u]-rec.Stimulus[c][t])) > 0.5 {
				return u
			}
		}
	}
	return -1
}
