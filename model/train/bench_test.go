package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"rgcpred/model"
)

// TestStepBench checks that the benchmark takes real training steps (the
// weights move) and reports a positive rate.
func TestStepBench(t *testing.T) {
	c := tinyConfig(model.HeadCat, 3)
	b, err := NewStepBench(c, 4, 2, 1, 1, PrecisionFP32)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before := append([]float32(nil), b.w.Tensors["head.weight"]...)
	r, err := b.Rate(3)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.PerSec > 0) {
		t.Errorf("rate %v samples/s, want > 0", r.PerSec)
	}
	// Where the CPU time is measured, the three figures agree (samples per
	// wall-second = per CPU-second x cores) and two threads keep at most
	// two cores busy (slack for the runtime's own threads).
	if runtime.GOOS == "linux" {
		if !(r.PerCPUSec > 0) || !(r.Cores > 0) || r.Cores > 2.5 {
			t.Errorf("per CPU-second %v, cores %v: want > 0 and cores <= 2.5", r.PerCPUSec, r.Cores)
		}
		if d := math.Abs(r.PerCPUSec*r.Cores-r.PerSec) / r.PerSec; d > 1e-9 {
			t.Errorf("per CPU-second %v x cores %v = %v, want the wall rate %v", r.PerCPUSec, r.Cores, r.PerCPUSec*r.Cores, r.PerSec)
		}
	}
	moved := 0
	for i, v := range b.w.Tensors["head.weight"] {
		if v != before[i] {
			moved++
		}
	}
	if moved == 0 {
		t.Error("three steps left the head's weights unchanged")
	}
	if b.opt.Step != 4 {
		t.Errorf("optimiser took %d steps, want 4 (warm-up + 3)", b.opt.Step)
	}
	if _, err := NewStepBench(model.Config{}, 4, 1, 1, 1, PrecisionFP32); err == nil {
		t.Error("an invalid configuration was accepted")
	}
}

// TestTorchTrainRate runs a stand-in for the PyTorch script (a shell
// script printing the reference's JSON line) and checks the rate is read,
// the arguments passed, and failures and bad output reported.
func TestTorchTrainRate(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := script("ok.sh", `echo "$@" > `+filepath.Join(dir, "args")+`
echo '{"stem": "gpt-a", "mode": "train", "batch": 64, "samples_per_s": 137.5}'
`)
	r, err := TorchTrainRate(context.Background(), "/bin/sh", ok, "gpt-a", 64, 2, 5)
	if err != nil || r != 137.5 {
		t.Fatalf("rate %v, %v; want 137.5", r, err)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "--mode train --stem gpt-a --batch 64 --threads 2 --iters 5"; strings.TrimSpace(string(args)) != want {
		t.Errorf("script got %q, want %q", args, want)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"fails.sh", "echo 'No module named torch' >&2; exit 1\n", "No module named torch"},
		{"garbage.sh", "echo hello\n", "hello"},
		{"norate.sh", `echo '{"samples_per_s": 0}'` + "\n", "no samples_per_s"},
	} {
		_, err := TorchTrainRate(context.Background(), "/bin/sh", script(tc.name, tc.body), "gpt-a", 64, 2, 5)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}
