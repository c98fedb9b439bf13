package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/rgc"
)

// TestImportKilosortShipped rewrites the shipped recording in Kilosort/phy
// shape (spikes in time order with their clusters, quality cells labelled
// good, the rest mua) and checks that `trainer import-kilosort` restores
// its spikes, cells and stimulus exactly, and that inspect reads the result.
func TestImportKilosortShipped(t *testing.T) {
	raw, err := rgc.LoadRaw(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	ks := t.TempDir()
	type spike struct {
		t int64
		c int32
	}
	var all []spike
	var tsv strings.Builder
	tsv.WriteString("cluster_id\tgroup\n")
	for _, c := range raw.Cells {
		for _, s := range c.Spikes {
			all = append(all, spike{s, int32(c.ClusterID)})
		}
		label := "mua"
		if c.Quality {
			label = "good"
		}
		fmt.Fprintf(&tsv, "%d\t%s\n", c.ClusterID, label)
	}
	slices.SortStableFunc(all, func(a, b spike) int { return int(a.t - b.t) })
	times, clusters := make([]int64, len(all)), make([]int32, len(all))
	for i, s := range all {
		times[i], clusters[i] = s.t, s.c
	}
	write := func(name string, data any) {
		f, err := os.Create(filepath.Join(ks, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := rgc.WriteNPY(f, data, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write("spike_times.npy", times)
	write("spike_clusters.npy", clusters)
	for name, s := range map[string]string{"cluster_group.tsv": tsv.String(), "params.py": fmt.Sprintf("sample_rate = %v\n", raw.SampleRateHz)} {
		if err := os.WriteFile(filepath.Join(ks, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "rec")
	err = runImportKilosort(context.Background(), []string{"--dir", ks, "--out", out,
		"--triggers", filepath.Join(shippedDir, rgc.FileTriggers), "--pattern", filepath.Join(shippedDir, rgc.FilePattern),
		"--num-samples", fmt.Sprint(raw.NumSamples), "--name", raw.Name})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rgc.LoadRaw(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cells) != len(raw.Cells) || got.NumSamples != raw.NumSamples || !slices.Equal(got.Triggers, raw.Triggers) || !slices.Equal(got.Pattern, raw.Pattern) {
		t.Fatalf("imported recording differs: %d cells, %d samples", len(got.Cells), got.NumSamples)
	}
	byID := make(map[int]rgc.CellInfo)
	for _, c := range raw.Cells {
		byID[c.ClusterID] = c
	}
	for _, c := range got.Cells {
		w := byID[c.ClusterID]
		if c.Quality != w.Quality || !slices.Equal(c.Spikes, w.Spikes) {
			t.Fatalf("cluster %d differs (quality %v, want %v)", c.ClusterID, c.Quality, w.Quality)
		}
	}
	if err := runInspect(context.Background(), []string{out}); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if err := runImportKilosort(context.Background(), []string{"--dir", ks, "--out", out, "--triggers", "x.csv", "--pattern", "y.csv", "--quality", "1,a"}); err == nil || !strings.Contains(err.Error(), "--quality") {
		t.Errorf("bad --quality: %v", err)
	}
}
