package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"rgcpred/evaluation"
	"strings"
	"testing"

	"rgcpred/rgc/glm"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
)

// TestGLMCommand fits the GLM to a synthetic recording with `trainer glm`,
// checks that both files it writes load as the same model, and evaluates it
// with `trainer eval --glm` next to the exact oracle.
func TestGLMCommand(t *testing.T) {
	ctx := context.Background()
	dir := testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 4, Seed: 11})
	tmp := t.TempDir()
	out, rep := filepath.Join(tmp, "glm.json"), filepath.Join(tmp, "report.json")
	if err := runGLM(ctx, []string{"--data", dir, "--out", out, "--report", rep, "--alphas", "10,1", "--nll-splits", "val"}); err != nil {
		t.Fatal(err)
	}
	a, err := glm.LoadTruth(out)
	if err != nil {
		t.Fatal(err)
	}
	b, err := glm.LoadTruth(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || len(a.Cells) != 2 {
		t.Fatalf("the truth and the report load as different models (%d and %d cells)", len(a.Cells), len(b.Cells))
	}

	js := filepath.Join(tmp, "eval.json")
	if err := runEval(ctx, []string{"--data", dir, "--split", "val", "--oracle", "--glm", rep, "--json", js}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var res evaluation.Report
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Models) != 2 || res.Models[0].Name != "oracle" || res.Models[1].Name != "glm" || res.Models[1].Kind != "glm" {
		t.Fatalf("models %+v", res.Models)
	}
	or, gl := res.Models[0], res.Models[1]
	for i := range gl.Cells {
		// The fitted GLM is close to the truth it was simulated from.
		if d := gl.Cells[i].NLL - or.Cells[i].NLL; math.Abs(d) > 0.05 {
			t.Errorf("cell %d: glm NLL %.4f, oracle %.4f", gl.Cells[i].ClusterID, gl.Cells[i].NLL, or.Cells[i].NLL)
		}
		if gl.Cells[i].Windows == 0 || gl.Cells[i].GeneratedSpikes == 0 {
			t.Errorf("cell %d: %d rollout windows, %g generated spikes", gl.Cells[i].ClusterID, gl.Cells[i].Windows, gl.Cells[i].GeneratedSpikes)
		}
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", dir}, "--out are required"},
		{[]string{"--data", dir, "--out", out, "--alphas", "1,x"}, "--alphas"},
		{[]string{"--data", dir, "--out", out, "--nll-splits", "dev"}, "--nll-splits"},
		{[]string{"--data", dir, "--out", out, "--cells", "some"}, "--cells"},
	} {
		if err := runGLM(ctx, bad.args); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("trainer glm %v: err = %v, want %q", bad.args, err, bad.want)
		}
	}
	if err := runEval(ctx, []string{"--data", dir, "--glm", filepath.Join(tmp, "missing.json")}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("eval --glm of a missing file: err = %v", err)
	}
}
