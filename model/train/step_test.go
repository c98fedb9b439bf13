package train

import (
	"math/rand/v2"
	"runtime"
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

// TestReplicatedStepAllocatesNothing checks that a training step of two
// data-parallel replicas (the trainer's default on two threads: both
// graphs' forward and backward, the averaging of gradients and batch-norm
// statistics, and the AdamW update) allocates nothing after the warm-up
// step, in float32 and in bf16, and with the weight average (Options.EMA)
// updated after it: the replicas' workers persist from step to step. Tolerance: 0 objects in the least of 5 rounds of 2 steps; the
// runtime allocates for itself now and then, an allocation of the step
// shows in every round.
func TestReplicatedStepAllocatesNothing(t *testing.T) {
	c, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    Precision
		ema  float64 // decay of the weight average; 0: none
	}{
		{"fp32", PrecisionFP32, 0},
		{"bf16", PrecisionBF16, 0},
		{"fp32 with EMA", PrecisionFP32, 0.999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewStepBench(c, 16, 2, 2, 1, tc.p) // and its warm-up step
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if tc.ema != 0 {
				b.AverageWeights(tc.ema)
			}
			if _, ok := b.g.(*replicated); !ok || b.Replicas != 2 {
				t.Fatalf("%d replicas in a %T, want 2 replicated", b.Replicas, b.g)
			}
			const rounds, runs = 5, 2
			var least uint64
			for k := 0; k < rounds; k++ {
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				if err := b.Steps(runs); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&m1)
				if n := m1.Mallocs - m0.Mallocs; k == 0 || n < least {
					least = n
				}
			}
			if least != 0 {
				t.Errorf("%d objects allocated in %d replicated training steps after warm-up (least of %d rounds), want 0", least, runs, rounds)
			}
			if tc.ema != 0 && b.ema.Step != rounds*runs {
				t.Errorf("%d updates of the weight average in %d steps", b.ema.Step, rounds*runs)
			}
		})
	}
}
