package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"rgcpred/evaluation"
	"strings"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
)

// TestEvalPolicies: fit-threshold writes a threshold policy that eval and
// the rollout accept; eval --policy reaches the rollouts (sampling gives
// other trains than the median on the oracle of a synthetic recording, the
// NLL is the same) and reports spike counts; --compare gives the paired
// difference (the oracle beats zero-input on NLL); --seconds shortens the
// rollout.
func TestEvalPolicies(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 3, Minutes: 2, Seed: 2})
	thPath := filepath.Join(dir, "th.json")
	// The oracle is the model here: fit its thresholds on the validation
	// split (the default).
	fitOut, err := captureStdout(t, func() error {
		return runFitThreshold(context.Background(), []string{"--data", dir, "--oracle", "--cells", "all", "--out", thPath, "--seconds", "20", "--iterations", "8"})
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, fitOut)
	}
	th, err := rollout.LoadThreshold(thPath)
	if err != nil || len(th.Thresholds) != 3 {
		t.Fatalf("threshold file: %+v, %v", th, err)
	}
	var res []evaluation.Report
	for i, pol := range []string{"median", "sample:5", "threshold:" + thPath} {
		jsonPath := filepath.Join(dir, "eval.json")
		out, err := captureStdout(t, func() error {
			return runEval(context.Background(), []string{"--data", dir, "--oracle", "--cells", "all", "--nll-stride", "50",
				"--json", jsonPath, "--policy", pol, "--seconds", "5", "--baseline", "zero", "--compare", "oracle:zero"})
		})
		if err != nil {
			t.Fatalf("%s: %v", pol, err)
		}
		if !strings.Contains(out, "cells fired, median ratio") || len(r0(t, jsonPath).Comparisons) != 1 ||
			r0(t, jsonPath).Comparisons[0].Metrics["nll"].Hi >= 0 {
			t.Fatalf("%s: no spike account in\n%s", pol, out)
		}
		var r evaluation.Report
		data, _ := os.ReadFile(jsonPath)
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		if want := []string{"median", "sample:5", "threshold:" + thPath}[i]; r.Policy != want {
			t.Fatalf("policy %q in the JSON, want %q", r.Policy, want)
		}
		if bins, secs := r.Bins[1]-r.Bins[0], 5.0; bins != int(secs*rgc.BinRateHz) {
			t.Fatalf("%d rollout bins, want 5 s", bins)
		}
		res = append(res, r)
	}
	for i := 1; i < len(res); i++ {
		a, b := res[0].Models[0], res[i].Models[0]
		same := true
		for c := range a.Cells {
			if a.Cells[c].NLL != b.Cells[c].NLL {
				t.Fatalf("policy %s changed the NLL", res[i].Policy)
			}
			same = same && math.Abs(a.Cells[c].VanRossum-b.Cells[c].VanRossum) < 1e-12
		}
		if same && strings.HasPrefix(res[i].Policy, "sample") {
			t.Errorf("policy %s gave the median's trains", res[i].Policy)
		}
	}
	// Under a threshold policy the silent zero-input baseline joins the
	// table unasked, rolled out by the median rule; scoring the split the
	// thresholds were fitted on is refused.
	jsonPath := filepath.Join(dir, "th-eval.json")
	if out, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"--data", dir, "--oracle", "--cells", "all", "--nll-stride", "50",
			"--json", jsonPath, "--policy", "threshold:" + thPath, "--seconds", "5"})
	}); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := r0(t, jsonPath); len(r.Models) != 2 || r.Models[0].Name != "zero" || r.Models[0].Policy != "median" || r.Models[0].Cells[0].GeneratedSpikes != 0 {
		t.Errorf("threshold eval without --baseline: models %s, zero's policy %q", r.ModelNames(), r.Models[0].Policy)
	}
	if _, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"--data", dir, "--oracle", "--cells", "all", "--split", "val", "--policy", "threshold:" + thPath})
	}); err == nil || !strings.Contains(err.Error(), "fitted on split val") {
		t.Errorf("threshold scored on its own split: %v", err)
	}
	if _, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"--data", dir, "--oracle", "--cells", "all", "--policy", "bogus"})
	}); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("bogus policy: %v", err)
	}
}

// r0 reads an eval JSON.
func r0(t *testing.T, path string) evaluation.Report {
	t.Helper()
	var r evaluation.Report
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFitThresholdMix fits thresholds for a mixture (the synthetic oracle
// with the zero-input model) and names the mixture as their source; two
// models at once are refused.
func TestFitThresholdMix(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 1, Seed: 4})
	thPath := filepath.Join(dir, "th-mix.json")
	out, err := captureStdout(t, func() error {
		return runFitThreshold(context.Background(), []string{"--data", dir, "--mix", "0.7*oracle+0.3*zero", "--cells", "all",
			"--out", thPath, "--seconds", "10", "--iterations", "4"})
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	th, err := rollout.LoadThreshold(thPath)
	if err != nil || len(th.Thresholds) != 2 {
		t.Fatalf("threshold file: %+v, %v", th, err)
	}
	data, err := os.ReadFile(thPath)
	if err != nil || !strings.Contains(string(data), "mix 0.7*oracle+0.3*zero") {
		t.Errorf("threshold file does not name the mixture: %s", data)
	}
	_, err = captureStdout(t, func() error {
		return runFitThreshold(context.Background(), []string{"--data", dir, "--mix", "oracle+zero", "--oracle", "--out", thPath})
	})
	if err == nil || !strings.Contains(err.Error(), "one of --ckpt, --glm, --mix or --oracle") {
		t.Errorf("two models at once: %v", err)
	}
}
