package bench

import (
	"encoding/json"
	"fmt"
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

// TestGPUCheckSummaryHonest: summary.py says false only where a
// measurement misses a goal. A parity part skipped for time, a latency
// step killed at its limit, a PyTorch row of another precision and a
// crashed gpucheck leave their goals null with the reason (a crash's
// panic, not its last stack frame); measured misses are false; PyTorch is
// compared at the precision in effect, end to end.
func TestGPUCheckSummaryHonest(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here: the summary is not run")
	}
	okPar := `{"config":"gpt-a-cat","weights":"models/gpt-a-cat.ckpt","report":{"ok":true,"windows":64}}`
	badPar := `{"config":"gpt-a-cat","report":{"ok":false,"windows":64,"first_over":"op 3","first_over_diff":0.01}}`
	timing := func(prec string, p50 float64) string {
		return fmt.Sprintf(`{"config":"gpt-a-cat","precision":%q,"batch":1024,"p50_ms":%g,"device_ms":%g},{"config":"gpt-a-cat","precision":%q,"batch":1,"p50_ms":0.25,"device_ms":0.2}`, prec, p50, p50/2, prec)
	}
	gc := func(parity, timings, skipped string) string {
		return `{"date":"d","device":"H100","libraries":[{"name":"libcuda","version":"12.4"}],"parity":[` + parity + `],"timing":[` + timings + `],"skipped":[` + skipped + `]}`
	}
	torch := func(prec string, e2e float64) string {
		return fmt.Sprintf(`{"stem":"gpt-a","precision":%q,"batch":1024,"e2e_p50_ms":%g,"device_ms":%g}`+"\n", prec, e2e, e2e/2)
	}
	lat := func(cells int, rt bool) string {
		return fmt.Sprintf(`{"points":[{"cells":%d,"devices":1,"latency":{"p99_ms":1},"deadline_misses":0,"real_time":%v}]}`, cells, rt)
	}
	stepsOK := `{"step":"gpucheck","status":0}` + "\n" + `{"step":"latency-6000","status":0}` + "\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		goal  string
		want  string // "true", "false", or the reason null's unmeasured must contain
	}{
		{"parity all ok", map[string]string{"gpucheck.json": gc(okPar, "", "")}, "parity_fp32_1e-4", "true"},
		{"parity skipped for time", map[string]string{"gpucheck.json": gc(okPar, "", `"parity gpt-b-cat: killed at its time limit (40s)"`)}, "parity_fp32_1e-4", "killed at its time limit"},
		{"parity missed", map[string]string{"gpucheck.json": gc(badPar, "", `"parity gpt-b-cat: not started"`)}, "parity_fp32_1e-4", "false"},
		{"gpucheck crashed", map[string]string{"gpucheck.log": "gpucheck: gpt-a-cat: 64 windows\npanic: cuda: CUDA_ERROR_ILLEGAL_ADDRESS\n\ngoroutine 1 [running]:\nmain.run()\n\t/x/main.go:40 +0x1\n"},
			"parity_fp32_1e-4", "panic: cuda: CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"2x end to end at the same precision", map[string]string{"gpucheck.json": gc(okPar, timing("fp32", 10), ""), "torch.jsonl": torch("fp32", 25) + torch("tf32", 12)},
			"2x_torch_at_batch_1024", "true"},
		{"2x missed at tf32", map[string]string{"gpucheck.json": gc(okPar, timing("tf32", 10), ""), "torch.jsonl": torch("fp32", 25) + torch("tf32", 12)},
			"2x_torch_at_batch_1024", "false"},
		{"no PyTorch row of that precision", map[string]string{"gpucheck.json": gc(okPar, timing("tf32", 10), ""), "torch.jsonl": torch("fp32", 25)},
			"2x_torch_at_batch_1024", "PyTorch has no tf32 row at batch 1024"},
		{"10,020 cells killed for time", map[string]string{"gpucheck.json": gc(okPar, "", ""), "latency-6000.json": lat(6000, true),
			"steps.jsonl": stepsOK + `{"step":"latency-10020","status":124,"limit_s":60}` + "\n", "latency-10020.log": "latency: 10020 cells\n"},
			"10000_cells_real_time", "latency-10020: killed at its 60 s limit"},
		{"10,020 cells skipped", map[string]string{"gpucheck.json": gc(okPar, "", ""), "latency-6000.json": lat(6000, true),
			"steps.jsonl": stepsOK + `{"step":"latency-10020","status":"skipped"}` + "\n"},
			"10000_cells_real_time", "skipped: out of time"},
		{"6,000 cells missed", map[string]string{"gpucheck.json": gc(okPar, "", ""), "latency-6000.json": lat(6000, false)},
			"10000_cells_real_time", "false"},
		{"10,020 cells served", map[string]string{"gpucheck.json": gc(okPar, "", ""), "latency-10020.json": lat(10020, true)},
			"10000_cells_real_time", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			files := map[string]string{"steps.jsonl": stepsOK}
			for k, v := range tc.files {
				files[k] = v
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(out, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if msg, err := exec.Command(py, "../tools/gpucheck/summary.py", "--out", out).CombinedOutput(); err != nil {
				t.Fatalf("summary.py: %v\n%s", err, msg)
			}
			var s struct {
				Goals      map[string]*bool  `json:"goals"`
				Unmeasured map[string]string `json:"unmeasured"`
			}
			raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			g := s.Goals[tc.goal]
			switch tc.want {
			case "true", "false":
				if g == nil || fmt.Sprint(*g) != tc.want {
					t.Errorf("%s = %v (unmeasured: %q), want %s", tc.goal, fmtGoal(g), s.Unmeasured[tc.goal], tc.want)
				}
			default:
				if g != nil || !strings.Contains(s.Unmeasured[tc.goal], tc.want) {
					t.Errorf("%s = %v, unmeasured %q; want null because %q", tc.goal, fmtGoal(g), s.Unmeasured[tc.goal], tc.want)
				}
			}
		})
	}
}

func fmtGoal(g *bool) string {
	if g == nil {
		return "null"
	}
	return fmt.Sprint(*g)
}
