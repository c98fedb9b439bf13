package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/evaluation"
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
		{"few resamples", []string{"--a", cpu, "--b", glm, "--zero", zero, "--resamples", "10"}, "at least 2000"},
	} {
		if err := runCompare(ctx, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
