package graph

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"gorgonia.org/tensor"

	"rgcpred/model"
)

// TestKernelsReuseBuffers checks that, after a warm-up call, the kernels'
// forward and backward passes allocate nothing, on two workers of a team
// (where a parallel section's body is handed to a helper, so a closure
// would escape): no buffer and no small object. The GEMM kernels have a
// team's packing space, as in a graph (sgemm's pool, used without one,
// may allocate again after a garbage collection).
func TestKernelsReuseBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	two := testPar(t, 2)
	team := newGemmTeam(two, false)
	pos := randTensor(rng, 0.1, 4)
	for i, d := 0, f32(pos); i < len(d); i++ {
		d[i] = 1 + float32(i)
	}
	cases := []kernelCase{
		{"conv", &conv1d{stride: 2, pad: 3, par: two, gemm: team}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 256), randTensor(rng, 1, 4, 3, 7)}},
		{"batchnorm+relu", &bnReLU{bn: batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: two}},
			[]*tensor.Dense{randTensor(rng, 1, 2, 4, 64), randTensor(rng, 1, 4), randTensor(rng, 1, 4), randTensor(rng, 1, 4), pos}},
		{"attention", &attention{t: 16, heads: 2, hd: 4, par: two, gemm: team}, []*tensor.Dense{randTensor(rng, 1, 32, 24)}},
		{"attention last query", &attention{t: 16, heads: 2, hd: 4, last: true, par: two, gemm: team}, []*tensor.Dense{randTensor(rng, 1, 32, 24)}},
		// Large enough for gemmTeam.run to split the GEMMs (m n k >= 1<<16).
		{"linear", linear{gemm: team}, []*tensor.Dense{randTensor(rng, 1, 64, 64), randTensor(rng, 1, 64, 64), randTensor(rng, 1, 64)}},
		{"layernorm", &layerNorm{eps: 1e-5, par: two}, []*tensor.Dense{randTensor(rng, 1, 16, 64), randTensor(rng, 1, 64), randTensor(rng, 1, 64)}},
		{"gelu", &gelu{par: two}, []*tensor.Dense{randTensor(rng, 1, 16, 64)}},
		{"relu", &relu{par: two}, []*tensor.Dense{randTensor(rng, 1, 16, 64)}},
		{"exciteadd", &exciteAdd{par: two}, []*tensor.Dense{randTensor(rng, 1, 2, 4, 128), randTensor(rng, 1, 2, 4), randTensor(rng, 1, 2, 4, 128)}},
		{"catnll", catNLL{}, []*tensor.Dense{randTensor(rng, 1, 8, 81), constTensor(3, 80, 0, 1, 2, 5, 7, 9)}},
	}
	for _, tc := range cases {
		os := kernelOutShape(t, tc)
		out, gout := make([]float32, os.TotalSize()), make([]float32, os.TotalSize())
		gins := make([][]float32, len(tc.in))
		for i, x := range tc.in {
			gins[i] = make([]float32, x.Shape().TotalSize())
		}
		diff := tc.k.diffWRT()
		step := func() {
			tc.k.forward(tc.in, out)
			for i, d := range diff {
				if d {
					tc.k.backward(i, tc.in, out, gout, gins[i])
				}
			}
		}
		step()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const runs = 10
		for r := 0; r < runs; r++ {
			step()
		}
		runtime.ReadMemStats(&m1)
		// Every tensor here is >= 2 KB, so a reallocated buffer shows.
		if b := (m1.TotalAlloc - m0.TotalAlloc) / runs; b > 1024 {
			t.Errorf("%s: %d bytes allocated per forward+backward, want <= 1024", tc.name, b)
		}
		if n := testing.AllocsPerRun(5, step); n != 0 {
			t.Errorf("%s: %.1f allocations per forward+backward, want 0", tc.name, n)
		}
	}
}

// TestTrainStepReusesBuffers checks that a whole training step (forward,
// backward, gradients) of gpt-a-cat-cpu allocates nothing after the
// warm-up run, on one thread and on two (a graph's team of helpers), in
// float32 and in bf16: no tensor, and no small object either (the
// parallel sections hand the team bodies kept by their kernels, not
// closures). Tolerance: 0 objects in the least of several rounds of
// steps; the runtime allocates for itself now and then (more on a loaded
// machine), while an allocation of the step shows in every round.
func TestTrainStepReusesBuffers(t *testing.T) {
	c, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		threads, batch int
		bf16           bool
	}{
		{1, 8, false},
		{1, 8, true},
		{2, 32, false},
		{2, 32, true},
	} {
		t.Run(fmt.Sprintf("threads=%d/batch=%d/bf16=%v", tc.threads, tc.batch, tc.bf16), func(t *testing.T) {
			w := randomWeights(t, c, 1)
			g, err := New(w, tc.batch, Options{Training: true, Threads: tc.threads, BF16: tc.bf16})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			x, cells, tg := randomBatch(c, tc.batch, 1)
			if err := g.SetInputs(x, cells, tg); err != nil {
				t.Fatal(err)
			}
			objects, bytes := leastAllocs(t, 5, 2, func() error {
				_, err := g.Run()
				return err
			})
			if objects != 0 {
				t.Errorf("%d objects (%d bytes) allocated in 2 training steps after warm-up (least of 5 rounds), want 0", objects, bytes)
			}
		})
	}
}

// leastAllocs runs step once to warm up, then rounds times runs steps, and
// returns the objects and bytes allocated by the round that allocated the
// fewest objects.
func leastAllocs(tb testing.TB, rounds, runs int, step func() error) (objects, bytes uint64) {
	tb.Helper()
	if err := step(); err != nil {
		tb.Fatal(err)
	}
	for k := 0; k < rounds; k++ {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for r := 0; r < runs; r++ {
			if err := step(); err != nil {
				tb.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		if o := m1.Mallocs - m0.Mallocs; k == 0 || o < objects {
			objects, bytes = o, m1.TotalAlloc-m0.TotalAlloc
		}
	}
	return objects, bytes
}
