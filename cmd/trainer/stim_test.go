package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
)

// TestEvalStimModes checks that eval refuses a checkpoint trained on the
// other stimulus mode than --stim, both ways, naming both, and runs it on
// its own mode.
func TestEvalStimModes(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	rec, err := rgc.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	save := func(mode rgc.StimMode) string {
		cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(rec.Cells))
		if err != nil {
			t.Fatal(err)
		}
		ck := &model.Checkpoint{Weights: model.InitWeights(cfg, rand.New(rand.NewPCG(1, 1))), CellIDs: rec.ClusterIDs(),
			BinRateHz: rgc.BinRateHz, WindowBins: rgc.WindowBins, Horizon: rgc.Horizon, StimMode: mode}
		path := filepath.Join(dir, mode.String()+".ckpt")
		if err := ck.Save(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		model, data rgc.StimMode
	}{
		{rgc.StimZeroPhase, rgc.StimCausal}, {rgc.StimCausal, rgc.StimZeroPhase},
		{rgc.StimCausal, rgc.StimCausal}, {rgc.StimZeroPhase, rgc.StimZeroPhase},
	} {
		path := save(tc.model)
		_, err := captureStdout(t, func() error {
			return runEval(context.Background(), []string{"--data", dir, "--cells", "all", "--ckpt", path, "--stim", tc.data.String(),
				"--nll-stride", "400", "--seconds", "1", "--threads", "1"})
		})
		if tc.model == tc.data {
			if err != nil {
				t.Errorf("%v model on %v data: %v", tc.model, tc.data, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "trained on "+tc.model.String()) || !strings.Contains(err.Error(), "input is "+tc.data.String()) {
			t.Errorf("%v model on %v data: %v, want a refusal naming both", tc.model, tc.data, err)
		}
	}
}

// TestFitThresholdGLM fits the threshold policy of a GLM (a synthetic
// recording's truth, in the GLM's format) and checks every cell gets one.
func TestFitThresholdGLM(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	out := filepath.Join(dir, "glm-threshold.json")
	if _, err := captureStdout(t, func() error {
		return runFitThreshold(context.Background(), []string{"--data", dir, "--cells", "all", "--glm", filepath.Join(dir, synth.TruthFile),
			"--out", out, "--seconds", "5", "--iterations", "3"})
	}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var f rollout.ThresholdFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) != 2 || !strings.HasPrefix(f.Checkpoint, "glm ") {
		t.Errorf("threshold file: %d cells, model %q", len(f.Cells), f.Checkpoint)
	}
	if _, err := captureStdout(t, func() error {
		return runFitThreshold(context.Background(), []string{"--data", dir, "--glm", "x.json", "--oracle", "--out", out})
	}); err == nil || !strings.Contains(err.Error(), "one of --ckpt, --glm, --mix or --oracle") {
		t.Errorf("--glm with --oracle: %v", err)
	}
}
