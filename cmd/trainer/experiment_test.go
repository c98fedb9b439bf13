package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/experiment"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
)

func TestExperimentCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "4"}, "--dir is required"},
		{[]string{"--dir", dir, "--samples", "100", "--steps", "4"}, "one of --steps, --samples and --time"},
		{[]string{"--dir", dir, "--repeats", "2", "--seeds", "1,2"}, "not both"},
		{[]string{"--dir", dir, "--repeats", "-1"}, "at least 1"},
		{[]string{"--dir", dir, "--seeds", "1,x"}, "--seeds"},
		{[]string{"--dir", dir, "--seeds", ","}, "no seeds"},
		{[]string{"--resume", dir, "--steps", "4"}, "--steps: --resume continues"},
		{[]string{"--resume", dir, "--stim", "zero-phase"}, "--stim: --resume continues"},
		{[]string{"--resume", dir, "--dir", filepath.Join(dir, "other")}, "differ"},
		{[]string{"--resume", filepath.Join(dir, "none")}, "manifest"},
		{[]string{"--dir", dir, "--data", filepath.Join(dir, "nodata")}, "nodata"},
		{[]string{"--dir", dir, "extra"}, "unexpected arguments"},
		{[]string{"--dir", dir, "--jobs", "0"}, "--jobs 0: want at least 1"},
	} {
		_, err := captureStdout(t, func() error { return runExperiment(context.Background(), tc.args) })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestExperimentCommand runs a one-run experiment through the command on
// zero-phase bins (the plan records the binning), then continues it with
// --resume on the test split (with --jobs, which --resume accepts).
func TestExperimentCommand(t *testing.T) {
	data := testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	dir := filepath.Join(t.TempDir(), "exp")
	out, err := captureStdout(t, func() error {
		return runExperiment(context.Background(), []string{"--dir", dir, "--data", data, "--cells", "all", "--stim", "zero-phase",
			"--configs", "gpt-a-cat-cpu", "--repeats", "1", "--steps", "4", "--batch", "4", "--val-every", "2",
			"--val-windows", "16", "--threads", "1", "--nll-stride", "50", "--eval-batch", "16"})
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"run 1/1 gpt-a-cat-cpu seed 1: training", "gpt-a-cat-cpu - zero", "results-val.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Error("carriage returns in output to a pipe")
	}
	m, err := experiment.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Plan.Budget.Steps != 4 || m.Plan.Segment != 10 || m.Plan.Stim != rgc.StimZeroPhase || m.Eval.GLM != "" || len(m.Runs) != 1 || m.Runs[0].Status != experiment.StatusTrained {
		t.Errorf("manifest plan %+v, eval %+v, runs %+v", m.Plan, m.Eval, m.Runs)
	}
	if m.Command[0] != "trainer" || m.Command[1] != "experiment" || m.Command[3] != dir {
		t.Errorf("manifest command %q", m.Command)
	}

	out, err = captureStdout(t, func() error {
		return runExperiment(context.Background(), []string{"--resume", dir, "--split", "test", "--jobs", "2"})
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "training") || !strings.Contains(out, "split test") {
		t.Errorf("--resume --split test trained or did not score the test split:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "results-test.json")); err != nil {
		t.Error(err)
	}
	if m, err = experiment.LoadManifest(dir); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.LastCommand, "--jobs") || slices.Contains(m.Command, "--jobs") {
		t.Errorf("manifest commands %q, last %q: want --jobs in the last only", m.Command, m.LastCommand)
	}
}
