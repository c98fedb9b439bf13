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
// threshold rows), and checks the refusals.
func TestCompareCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "c.json")
	cpu, glm := "../../docs/results/long/threshold-s6-test.json", "../../docs/results/causal/threshold-glm-test.json"
	ctx := context.Background()
	if err := runCompare(ctx, []string{"--a", cpu + "," + cpu, "--b", glm, "--json", out}); err != nil {
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
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got evaluation.Comparison
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, m := range evaluation.MetricNames {
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
		{"unknown model", []string{"--a", cpu, "--a-model", "nope", "--b", glm}, "no model"},
		{"few resamples", []string{"--a", cpu, "--b", glm, "--resamples", "10"}, "at least 2000"},
	} {
		if err := runCompare(ctx, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
