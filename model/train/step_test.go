package train

import (
	"math/rand/v2"
	"testing"

	"rgcpred/model"
)

// TestAdamWUpdateAllocatesNothing checks that an optimiser step after the
// first (which creates the moments) allocates nothing, so that a training
// step as a whole (graph: TestTrainStepReusesBuffers) allocates no buffers.
func TestAdamWUpdateAllocatesNothing(t *testing.T) {
	c, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, 60)
	if err != nil {
		t.Fatal(err)
	}
	w := model.InitWeights(c, rand.New(rand.NewPCG(1, 1)))
	g := map[string][]float32{}
	for n, v := range w.Tensors {
		g[n] = make([]float32, len(v))
		g[n][0] = 0.1
	}
	grad := func(n string) []float32 { return g[n] }
	o := NewAdamW()
	o.Update(w, grad, 1e-3)
	if n := testing.AllocsPerRun(3, func() { o.Update(w, grad, 1e-3) }); n != 0 {
		t.Errorf("%.0f allocations per optimiser step, want 0", n)
	}
	if o.Step != 5 { // the first update, AllocsPerRun's warm-up and 3 runs
		t.Errorf("%d steps taken, want 5", o.Step)
	}
}
