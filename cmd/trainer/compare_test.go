package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/evaluation"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
)

// TestCompareCLI compares the shipped default's threshold-policy scores
// with the GLM's, each scored with its own thresholds (the README's
// threshold rows), both beside the silent zero-input baseline, and checks
// the refusals.
func TestCompareCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "c.json")
	cpu, glm := "../../docs/results/long/threshold-s6-test.json", "../../docs/results/causal/threshold-glm-test.json"
	zero := "../../docs/results/long/headline-test.json"
	ctx := context.Background()
	if err := runCompare(ctx, []string{"--a", cpu + "," + cpu, "--b", glm, "--zero", zero, "--json", out}); err != nil {
		t.Fatal(err)
	}
	rep, err := evaluation.ReadReport(cpu)
	if err != nil {
		t.Fatal(err)
	}
	g, err := evaluation.ReadReport(glm)
	if err != nil {
		t.Fatal(err)
	}
	want, err := evaluation.Compare("x", "a", "b", rep.Models[0].Cells, g.Models[0].Cells, 2000, 1)
	if err != nil {
		t.Fatal(err)
	}
	z, err := evaluation.ReadReport(zero)
	if err != nil {
		t.Fatal(err)
	}
	wantZ, err := evaluation.Compare("x", "glm", "zero", g.Models[0].Cells, z.Model("zero").Cells, 2000, 1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var cs []evaluation.Comparison
	if err := json.Unmarshal(data, &cs); err != nil || len(cs) != 3 {
		t.Fatalf("%d comparisons, %v; want A - B, A - zero, B - zero", len(cs), err)
	}
	got := cs[0]
	if cs[1].B != "zero" || cs[2].A != "glm" || cs[2].B != "zero" {
		t.Errorf("comparisons %s, %s: want A - zero, B - zero", cs[1].Name, cs[2].Name)
	}
	for _, m := range evaluation.MetricNames {
		if d := cs[2].Metrics[m]; d.IQM != wantZ.Metrics[m].IQM || d.Lo != wantZ.Metrics[m].Lo {
			t.Errorf("glm - zero, %s: %+v, want %+v", m, d, wantZ.Metrics[m])
		}
		d := got.Metrics[m]
		if d.IQM != want.Metrics[m].IQM || d.Seeds == nil || len(d.Seeds.IQMs) != 2 || d.Seeds.IQMs[0] != d.IQM {
			t.Errorf("%s: %+v, want IQM %g with two equal seeds", m, d, want.Metrics[m].IQM)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing --b", []string{"--a", cpu}, "required"},
		{"threshold policy without zero-input", []string{"--a", cpu, "--b", glm}, "--zero"},
		{"unknown model", []string{"--a", cpu, "--a-model", "nope", "--b", glm, "--zero", zero}, "no model"},
		{"names not one per report", []string{"--a", cpu + "," + cpu, "--a-model", "a,b,c", "--b", glm, "--zero", zero}, "3 model names for 2 reports"},
		{"few resamples", []string{"--a", cpu, "--b", glm, "--zero", zero, "--resamples", "10"}, "at least 2000"},
	} {
		if err := runCompare(ctx, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestBlockBootstrapCLI: eval --block-seconds keeps every cell's scores in
// time blocks and gives each comparison a block x cell interval beside the
// cell-only one; compare reads the blocks back and, merging 1 s blocks
// into 2 s ones, gives the interval eval gives at 2 s; reports without
// blocks refuse --block-seconds.
func TestBlockBootstrapCLI(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 4, Minutes: 2, Seed: 3})
	ctx := context.Background()
	eval := func(seconds string) evaluation.Report {
		path := filepath.Join(dir, "eval-"+seconds+".json")
		out, err := captureStdout(t, func() error {
			return runEval(ctx, []string{"--data", dir, "--oracle", "--baseline", "zero", "--cells", "all", "--nll-stride", "7",
				"--compare", "oracle:zero", "--block-seconds", seconds, "--json", path})
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, "time blocks x cells") {
			t.Errorf("no block interval in\n%s", out)
		}
		return r0(t, path)
	}
	one, two := eval("1"), eval("2")
	n := two.Bins[1] - two.Bins[0]
	for m, d := range two.Comparisons[0].Metrics {
		if d.Block == nil || d.Block.Seconds != 2 || d.Block.Lo > d.Block.Hi {
			t.Fatalf("%s: block interval %+v", m, d.Block)
		}
		if m != "nll" && d.Block.Blocks != rollout.BlockCount(n, two.BlockBins) {
			t.Errorf("%s: %d blocks over %d bins of %d", m, d.Block.Blocks, n, two.BlockBins)
		}
	}
	if c := one.Models[0].Cells[0]; c.Blocks == nil || len(c.Blocks.Train) != rollout.BlockCount(n, one.BlockBins) {
		t.Fatalf("cell blocks %+v", c.Blocks)
	}
	out := filepath.Join(dir, "c.json")
	p1 := filepath.Join(dir, "eval-1.json")
	if err := runCompare(ctx, []string{"--a", p1, "--a-model", "oracle", "--b", p1, "--b-model", "zero", "--block-seconds", "2", "--json", out}); err != nil {
		t.Fatal(err)
	}
	var got evaluation.Comparison
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for m, want := range two.Comparisons[0].Metrics {
		g := got.Metrics[m]
		if g.Block == nil || math.Abs(g.Block.Lo-want.Block.Lo) > 1e-9 || math.Abs(g.Block.Hi-want.Block.Hi) > 1e-9 || g.IQM != want.IQM {
			t.Errorf("%s: compare of 1 s blocks merged to 2 s gives %+v, eval at 2 s %+v", m, g.Block, want.Block)
		}
	}
	err := runCompare(ctx, []string{"--a", p1, "--a-model", "oracle", "--b", p1, "--b-model", "zero", "--block-seconds", "1.5"})
	if err == nil || !strings.Contains(err.Error(), "whole multiple") {
		t.Errorf("1.5 s from 1 s blocks: %v", err)
	}
	old := "../../docs/results/long/threshold-s6-test.json"
	err = runCompare(ctx, []string{"--a", old, "--b", old, "--zero", "../../docs/results/long/headline-test.json", "--block-seconds", "5"})
	if err == nil || !strings.Contains(err.Error(), "without time blocks") {
		t.Errorf("report without blocks: %v", err)
	}
}
