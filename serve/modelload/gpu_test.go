package modelload

import (
	"strings"
	"testing"

	"rgcpred/base/cuda"
	"rgcpred/model/gpu"
)

// TestGPUWithoutGPU: predictord --backend cuda without a GPU fails at load
// with an error naming the checkpoint and what CUDA lacked, and a missing
// checkpoint is reported as such first.
func TestGPUWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(0, ""); err == nil {
		d.Close()
		t.Skip("a GPU is here: model/gpu's device tests cover the engine")
	}
	for _, tc := range []struct{ path, want string }{
		{"../../models/gpt-a-cat-cpu.ckpt", "cuda"},
		{"../../models/none.ckpt", "load checkpoint"},
	} {
		m, err := GPU(gpu.Options{})(tc.path, 0)
		if err == nil {
			m.Close()
			t.Fatalf("%s: loaded without a GPU", tc.path)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %q, want it to name the file and contain %q", tc.path, err, tc.want)
		}
	}
}
