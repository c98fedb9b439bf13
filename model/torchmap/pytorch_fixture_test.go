package torchmap

import (
	"math"
	"testing"

	"rgcpred/model/engine"
	"rgcpred/model/safetensors"
	"rgcpred/rgc"
)

// TestPyTorchFixture imports a state_dict PyTorch wrote (a freshly
// initialised SpikeModel of shared/tools/torchref.py at the gpt-a-cat-cpu
// sizes, testdata/make-pytorch-fixture.sh) and serves it with the Go engine
// on the real windows PyTorch ran: logits within 1e-5 and probabilities
// within 1e-6 of PyTorch's (float32 sums in another order; docs/interop.md
// gives the figures). The reference is PyTorch itself, not model/ref, so an
// architecture misreading shared by ref and the engine fails here. No
// Python runs.
func TestPyTorchFixture(t *testing.T) {
	const logitTol, probTol = 1e-5, 1e-6
	sd, err := safetensors.ReadFile("testdata/pytorch-gpt-a-cat-cpu.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := safetensors.ReadFile("testdata/pytorch-probe.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	tensor := func(name string) *safetensors.Tensor {
		t.Helper()
		tn := probe.Tensor(name)
		if tn == nil {
			t.Fatalf("probe lacks %s", name)
		}
		return tn
	}
	f32 := func(name string) []float32 {
		t.Helper()
		v, err := tensor(name).Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rows, err := tensor(ProbeCellRow).Int64s()
	if err != nil {
		t.Fatal(err)
	}
	input, wantLogits, wantProb := f32(ProbeInput), f32(ProbeLogits), f32(ProbeProb)
	n := len(rows)
	// Embedding row r serves cluster id 1000+r (the file names no cells).
	cfg, err := InferConfig(sd, 4)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, cfg.NumCells)
	for r := range ids {
		ids[r] = 1000 + r
	}
	ck, err := Import(sd, Options{CellIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if got := ck.Weights.Config.Name(); got != "gpt-a-cat-cpu" {
		t.Fatalf("imported configuration %s, want gpt-a-cat-cpu", got)
	}
	b := &rgc.Batch{Inputs: input, Cells: make([]int, n), Ends: make([]int, n)}
	for i, r := range rows {
		b.Cells[i], b.Ends[i] = ids[r], rgc.WindowBins-1+i
	}
	e, err := engine.New(ck, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	logits := make([]float32, len(wantLogits))
	prob := make([]float32, n*rgc.NumClasses)
	if err := e.Logits(b, logits); err != nil {
		t.Fatal(err)
	}
	if err := e.Predict(b, prob); err != nil {
		t.Fatal(err)
	}
	worst := func(a, b []float32) float64 {
		var m float64
		for i := range a {
			m = max(m, math.Abs(float64(a[i])-float64(b[i])))
		}
		return m
	}
	dl, dp := worst(logits, wantLogits), worst(prob, wantProb)
	// The windows must matter, or agreement would say little: the
	// probabilities differ between windows by far more than the tolerance.
	spread := worst(wantProb[:rgc.NumClasses], wantProb[rgc.NumClasses:2*rgc.NumClasses])
	t.Logf("%d windows: max |d logit| %.2g, max |d p| %.2g against PyTorch; windows 0 and 1 differ by %.2g", n, dl, dp, spread)
	if dl > logitTol || dp > probTol {
		t.Errorf("Go engine against PyTorch: max |d logit| %.3g (tolerance %g), max |d p| %.3g (tolerance %g)", dl, logitTol, dp, probTol)
	}
	if spread < 100*probTol {
		t.Errorf("windows 0 and 1 differ by %.2g in PyTorch's probabilities: the fixture does not exercise the model", spread)
	}
}
