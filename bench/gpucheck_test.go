package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rgcpred/base/cuda"
)

// TestGPUCheckWithoutGPU: on a machine without a GPU the device check
// says so (NoGPU) and still reports every part, each with the error that
// stopped it (naming what was looked for), and its windows and weights
// are found. Where a GPU
// is present the device check itself runs GPUCheck.
func TestGPUCheckWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(0, ""); err == nil {
		d.Close()
		t.Skip("a GPU is here: tools/gpucheck/run.sh runs the device check")
	}
	rep, err := GPUCheck(GPUCheckOptions{Data: "../data/chicken-17-08-21", Models: "../models",
		Configs: []string{"gpt-a-cat-cpu", "gpt-b-logmix"}, Windows: 2, Timed: []string{"gpt-a-cat"},
		Batches: []int{4}, TimeEach: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Parity) != 2 || len(rep.Timing) != 2 || rep.Device != "" || !strings.HasPrefix(rep.NoGPU, "no GPU: cuda") {
		t.Fatalf("report %+v: want 2 parity and 2 timing entries (fp32, tf32), no device, and why no GPU", rep)
	}
	for _, p := range rep.Parity {
		if p.Report != nil || !strings.Contains(p.Error, "cuda") {
			t.Errorf("%s: report %v, error %q: want the CUDA error", p.Config, p.Report, p.Error)
		}
	}
	if rep.Parity[0].Weights != "../models/gpt-a-cat-cpu.ckpt" || !strings.HasPrefix(rep.Parity[1].Weights, "random") {
		t.Errorf("weights %q and %q: want the shipped checkpoint and random weights", rep.Parity[0].Weights, rep.Parity[1].Weights)
	}
	for _, tm := range rep.Timing {
		if tm.Error == "" {
			t.Errorf("timing %+v without a GPU and without an error", tm)
		}
	}
}

// TestGPUCheckSummaryWithoutGPU: the device check's summary
// (tools/gpucheck/summary.py) of a run without a GPU leaves every goal
// null, not false, with "no GPU" and CUDA's reason as why, and counts the
// device tests' skips with their reason.
func TestGPUCheckSummaryWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(0, ""); err == nil {
		d.Close()
		t.Skip("a GPU is here: tools/gpucheck/run.sh runs the device check")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here: the summary is not run")
	}
	rep, err := GPUCheck(GPUCheckOptions{Data: "../data/chicken-17-08-21", Models: "../models",
		Configs: []string{"gpt-a-cat-cpu"}, Windows: 2, Timed: []string{"gpt-a-cat"}, Batches: []int{4}, TimeEach: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	skip := "    device_test.go:14: no GPU here: cuda: the CUDA driver (libcuda) not found\n--- SKIP: TestDevice (0.00s)\n--- PASS: TestFindLib (0.00s)\n"
	for name, data := range map[string]string{
		"gpucheck.json":     string(b),
		"steps.jsonl":       `{"step":"gpucheck","status":0,"seconds":1,"limit_s":200}` + "\n",
		"cuda-test.log":     skip,
		"torch-gpt-a-1.log": "ModuleNotFoundError: No module named 'torch'\n",
		"latency-60.log":    "latency: checkpoint models/gpt-a-cat.ckpt: gpu: cuda: the CUDA driver (libcuda) not found\n",
	} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, "../tools/gpucheck/summary.py", "--out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("summary.py: %v\n%s", err, msg)
	}
	var s struct {
		GPU        string                    `json:"gpu"`
		Goals      map[string]*bool          `json:"goals"`
		Unmeasured map[string]string         `json:"unmeasured"`
		Tests      map[string]map[string]any `json:"tests"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.GPU, "no GPU: cuda") || len(s.Goals) != 4 {
		t.Fatalf("summary: gpu %q, %d goals; want no GPU and 4 goals", s.GPU, len(s.Goals))
	}
	for g, v := range s.Goals {
		if v != nil || !strings.HasPrefix(s.Unmeasured[g], "no GPU: cuda") {
			t.Errorf("goal %s: %v, unmeasured because %q; want null, no GPU", g, v, s.Unmeasured[g])
		}
	}
	if !strings.Contains(s.Unmeasured["2x_torch_at_batch_1024"], "No module named 'torch'") {
		t.Errorf("PyTorch's absence not said: %q", s.Unmeasured["2x_torch_at_batch_1024"])
	}
	ct := s.Tests["cuda-test"]
	why, _ := ct["skip_reason"].(string)
	if ct["skip"] != 1.0 || ct["pass"] != 1.0 || !strings.Contains(why, "no GPU here") {
		t.Errorf("cuda-test counted %v: want 1 pass, 1 skip saying no GPU", ct)
	}
}
