package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/base/cli/clitest"
	"rgcpred/base/cuda"
	"rgcpred/bench"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0,
// in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	clitest.HelpFlags(t, "-windows", func(arg string) error { return run([]string{arg}) })
}

// TestBadFlags: a missing report path and a bad batch list are errors
// before anything runs.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--json", filepath.Join(t.TempDir(), "r.json"), "--batches", "64,x"},
		{"--json", filepath.Join(t.TempDir(), "r.json"), "--batches", "0"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestPartChild: --part runs one part and writes its result for the
// parent; here, without a GPU, the parity part's result carries CUDA's
// error and the checkpoint it would have used.
func TestPartChild(t *testing.T) {
	if d, err := cuda.Open(0, ""); err == nil {
		d.Close()
		t.Skip("a GPU is here: the part would run for real (tools/gpucheck/run.sh)")
	}
	out := filepath.Join(t.TempDir(), "part.json")
	if err := run([]string{"--data", "../../../data/chicken-17-08-21", "--models", "../../../models",
		"--part", "parity gpt-a-cat-cpu 2", "--part-json", out}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res bench.GPUPartResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if p := res.Parity; p == nil || !strings.Contains(p.Error, "cuda") || !strings.HasSuffix(p.Weights, "gpt-a-cat-cpu.ckpt") {
		t.Fatalf("part result %+v: want CUDA's error and the shipped checkpoint", p)
	}
}

// TestInProcessWithoutGPU: --in-process runs every part here and writes
// the report, with the libraries listed and CUDA's absence as each
// part's error.
func TestInProcessWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(0, ""); err == nil {
		d.Close()
		t.Skip("a GPU is here: the parts would run for real (tools/gpucheck/run.sh)")
	}
	out := filepath.Join(t.TempDir(), "r.json")
	if err := run([]string{"--data", "../../../data/chicken-17-08-21", "--models", "../../../models", "--in-process",
		"--configs", "gpt-a-cat-cpu", "--timed", "", "--windows", "2", "--json", out}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.GPUReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.NoGPU == "" || len(rep.Libraries) == 0 || len(rep.Parity) != 1 || !strings.Contains(rep.Parity[0].Error, "cuda") {
		t.Fatalf("report %+v: want no GPU, the libraries and the parity part's CUDA error", rep)
	}
}

// TestBadFlag: an unknown flag and a missing --json are usage errors that
// print no usage, only the error and a hint.
func TestBadFlag(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {}} {
		clitest.BadFlag(t, "gpucheck", func() error { return run(args) })
	}
}
