package graph

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"gorgonia.org/tensor"
)

// TestKernelsReuseBuffers checks that, after a warm-up call, the kernels'
// forward and backward passes allocate no buffers: at most a few small
// objects (the closures of parallel sections, which escape to the worker
// goroutines), never memory that grows with the tensors.
func TestKernelsReuseBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	one := parallel{1}
	pos := randTensor(rng, 0.1, 4)
	for i, d := 0, f32(pos); i < len(d); i++ {
		d[i] = 1 + float32(i)
	}
	cases := []kernelCase{
		{"conv", &conv1d{stride: 2, pad: 3, par: one}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 256), randTensor(rng, 1, 4, 3, 7)}},
		{"batchnorm+relu", &bnReLU{bn: batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: one}},
			[]*tensor.Dense{randTensor(rng, 1, 2, 4, 64), randTensor(rng, 1, 4), randTensor(rng, 1, 4), randTensor(rng, 1, 4), pos}},
		{"attention", &attention{t: 16, heads: 2, hd: 4, par: one}, []*tensor.Dense{randTensor(rng, 1, 32, 24)}},
		{"linear", linear{}, []*tensor.Dense{randTensor(rng, 1, 16, 32), randTensor(rng, 1, 32, 32), randTensor(rng, 1, 32)}},
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
