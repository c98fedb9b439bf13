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
// forward and backward passes allocate no buffers: at most a few small
// objects (the closures of parallel sections, which escape to the graph's
// team of helpers), never memory that grows with the tensors. The GEMM kernels
// have a team's packing space, as in a graph (sgemm's pool, used without
// one, may allocate again after a garbage collection).
func TestKernelsReuseBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	one := parallel{n: 1}
	team := newGemmTeam(one, false)
	pos := randTensor(rng, 0.1, 4)
	for i, d := 0, f32(pos); i < len(d); i++ {
		d[i] = 1 + float32(i)
	}
	cases := []kernelCase{
		{"conv", &conv1d{stride: 2, pad: 3, par: one, gemm: team}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 256), randTensor(rng, 1, 4, 3, 7)}},
		{"batchnorm+relu", &bnReLU{bn: batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: one}},
			[]*tensor.Dense{randTensor(rng, 1, 2, 4, 64), randTensor(rng, 1, 4), randTensor(rng, 1, 4), randTensor(rng, 1, 4), pos}},
		{"attention", &attention{t: 16, heads: 2, hd: 4, par: one, gemm: team}, []*tensor.Dense{randTensor(rng, 1, 32, 24)}},
		{"linear", linear{gemm: team}, []*tensor.Dense{randTensor(rng, 1, 16, 32), randTensor(rng, 1, 32, 32), randTensor(rng, 1, 32)}},
		{"layernorm", &layerNorm{eps: 1e-5}, []*tensor.Dense{randTensor(rng, 1, 16, 64), randTensor(rng, 1, 64), randTensor(rng, 1, 64)}},
		{"gelu", &gelu{par: one}, []*tensor.Dense{randTensor(rng, 1, 16, 64)}},
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
		if n := testing.AllocsPerRun(5, step); n > 8 {
			t.Errorf("%s: %.0f allocations per forward+backward, want <= 8", tc.name, n)
		}
	}
}

// TestTrainStepReusesBuffers checks that a whole training step (forward,
// backward, gradients) of gpt-a-cat-cpu allocates no tensor after the
// warm-up run: what remains per step is a fixed number of small objects
// (one closure per parallel section, handed to the graph's persistent
// team, and gorgonia's own), so the bytes per step stay under 64 KiB and do
// not grow with the batch (within 4 KiB from batch 8 to batch 32; one
// activation of batch 32 is at least 8 KiB), and the objects stay under
// 320 (238 measured; a goroutine or wait group per section would add
// hundreds); in float32 and in bf16.
func TestTrainStepReusesBuffers(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		t.Run(fmt.Sprintf("bf16=%v", bf16), func(t *testing.T) { checkStepReusesBuffers(t, bf16) })
	}
}

func checkStepReusesBuffers(t *testing.T, bf16 bool) {
	c, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, 60)
	if err != nil {
		t.Fatal(err)
	}
	perStep := map[int]uint64{}
	for _, batch := range []int{8, 32} {
		w := randomWeights(t, c, 1)
		g, err := New(w, batch, Options{Training: true, Threads: 2, BF16: bf16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		x, cells, tg := randomBatch(c, batch, 1)
		if err := g.SetInputs(x, cells, tg); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Run(); err != nil {
			t.Fatal(err)
		}
		// The least of several measurements: a reallocated buffer shows in
		// every step, the runtime's occasional own allocations (more on a
		// loaded machine) do not.
		const runs, rounds = 2, 5
		var objects uint64
		for k := 0; k < rounds; k++ {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for r := 0; r < runs; r++ {
				if _, err := g.Run(); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&m1)
			if b := (m1.TotalAlloc - m0.TotalAlloc) / runs; k == 0 || b < perStep[batch] {
				perStep[batch], objects = b, (m1.Mallocs-m0.Mallocs)/runs
			}
		}
		t.Logf("batch %d: %d bytes in %d objects per step", batch, perStep[batch], objects)
		if objects > 320 {
			t.Errorf("batch %d: %d objects allocated per training step, want <= 320", batch, objects)
		}
		if perStep[batch] > 64<<10 {
			t.Errorf("batch %d: %d bytes allocated per training step, want <= 64 KiB", batch, perStep[batch])
		}
	}
	if d := int64(perStep[32]) - int64(perStep[8]); d > 4<<10 {
		t.Errorf("a step of batch 32 allocates %d bytes more than one of batch 8: a buffer is reallocated", d)
	}
}
