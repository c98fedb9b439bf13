package evaluation

import (
	"strings"
	"testing"

	"rgcpred/base/cuda"
	"rgcpred/model"
	"rgcpred/model/gpu"
)

// TestGPUCheckpointSpecWithoutGPU: a checkpoint spec on the GPU backend
// checks the checkpoint as the CPU's does (an unknown cell is refused
// first) and, without a GPU, fails to open with the CUDA error, naming
// the checkpoint.
func TestGPUCheckpointSpecWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(0, ""); err == nil {
		d.Close()
		t.Skip("a GPU is here: model/gpu's device tests cover the engine")
	}
	const path = "../models/gpt-a-cat-cpu.ckpt"
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ids  []int
		want string
	}{
		{"unknown cell", []int{-5}, "does not know cells"},
		{"no GPU", ck.CellIDs[:2], "cuda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := GPUCheckpointSpec([]string{path}, tc.ids, 8, gpu.Options{}, ck.StimMode)
			if len(sp.Open) != 1 || sp.Kind != "checkpoint" {
				t.Fatalf("spec %+v: want one checkpoint to open", sp)
			}
			p, done, err := sp.Open[0]()
			if err == nil {
				done()
				t.Fatalf("opened %T without a GPU", p)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q: want it to name %s and contain %q", err, path, tc.want)
			}
		})
	}
}
