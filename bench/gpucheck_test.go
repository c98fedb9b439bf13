package bench

import (
	"strings"
	"testing"
	"time"

	"rgcpred/base/cuda"
)

// TestGPUCheckWithoutGPU: on a machine without a GPU the device check
// still reports every part, each with the error that stopped it (naming
// what was looked for), and its windows and weights are found. Where a GPU
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
	if len(rep.Parity) != 2 || len(rep.Timing) != 2 || rep.Device != "" {
		t.Fatalf("report %+v: want 2 parity and 2 timing entries (fp32, tf32), no device", rep)
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
