package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// BenchmarkKernels measures the forward and backward passes (all
// differentiable inputs) of the encoder's heavy kernels at the paper CNN's
// shapes for batch 64 and 2 threads, in CPU time per call (the cores are
// shared, so wall time is noisy).
func BenchmarkKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 6))
	two := testPar(b, 2)
	bnIn := func(nb, c, l int) []*tensor.Dense {
		v := randTensor(rng, 0.3, c)
		for i, d := 0, f32(v); i < len(d); i++ {
			d[i] = 1 + d[i]*d[i]
		}
		return []*tensor.Dense{randTensor(rng, 1, nb, c, l), randTensor(rng, 1, c), randTensor(rng, 1, c), randTensor(rng, 1, c), v}
	}
	cases := []kernelCase{
		{"bnrelu/64x16x512", &bnReLU{bn: batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: two}}, bnIn(64, 16, 512)},
		{"bnrelu/64x128x256", &bnReLU{bn: batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: two}}, bnIn(64, 128, 256)},
		{"bn/64x64x256", &batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: two}, bnIn(64, 64, 256)},
		{"conv/stem1-k21s2", &conv1d{stride: 2, pad: 10, par: two}, []*tensor.Dense{randTensor(rng, 1, 64, 5, 1024), randTensor(rng, 1, 16, 5, 21)}},
		{"conv/stem2-k21", &conv1d{stride: 1, pad: 10, par: two}, []*tensor.Dense{randTensor(rng, 1, 64, 16, 512), randTensor(rng, 1, 16, 16, 21)}},
		{"conv/block0-k7s2", &conv1d{stride: 2, pad: 3, par: two}, []*tensor.Dense{randTensor(rng, 1, 64, 128, 512), randTensor(rng, 1, 128, 128, 7)}},
		{"conv/block3-k7", &conv1d{stride: 1, pad: 3, par: two}, []*tensor.Dense{randTensor(rng, 1, 64, 128, 64), randTensor(rng, 1, 128, 128, 7)}},
		{"conv/block0-1x1", &conv1d{stride: 1, par: two}, []*tensor.Dense{randTensor(rng, 1, 64, 16, 512), randTensor(rng, 1, 128, 16, 1)}},
		{"conv/shortcut-1x1s2", &conv1d{stride: 2, par: two}, []*tensor.Dense{randTensor(rng, 1, 64, 16, 512), randTensor(rng, 1, 64, 16, 1)}},
	}
	for _, tc := range cases {
		shapes := make([]tensor.Shape, len(tc.in))
		for i, x := range tc.in {
			shapes[i] = x.Shape()
		}
		os, err := tc.k.outShape(shapes)
		if err != nil {
			b.Fatal(err)
		}
		out, gout := make([]float32, os.TotalSize()), make([]float32, os.TotalSize())
		for i := range gout {
			gout[i] = float32(rng.NormFloat64())
		}
		gins := make([][]float32, len(tc.in))
		for i, x := range tc.in {
			gins[i] = make([]float32, x.Shape().TotalSize())
		}
		diff := tc.k.diffWRT()
		for _, dir := range []string{"fwd", "fwd+bwd"} {
			b.Run(fmt.Sprintf("%s/%s", tc.name, dir), func(b *testing.B) {
				tc.k.forward(tc.in, out)
				b.ResetTimer()
				cpu0 := processCPU()
				defer func() {
					b.ReportMetric((processCPU()-cpu0)*1e3/float64(b.N), "cpu-ms/op")
				}()
				for i := 0; i < b.N; i++ {
					// The kernels reuse per-forward state in backward.
					tc.k.forward(tc.in, out)
					if dir == "fwd" {
						continue
					}
					for j, d := range diff {
						if d {
							tc.k.backward(j, tc.in, out, gout, gins[j])
						}
					}
				}
			})
		}
	}
}

// BenchmarkGELU measures GELU's forward pass over a GPT MLP activation
// (64 windows x 64 tokens x 256), one thread.
func BenchmarkGELU(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 7))
	x := []*tensor.Dense{randTensor(rng, 1, 64*64, 256)}
	out := make([]float32, 64*64*256)
	g := &gelu{par: parallel{n: 1}}
	g.forward(x, out)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		g.forward(x, out)
	}
	b.ReportMetric((processCPU()-cpu0)*1e3/float64(b.N), "cpu-ms/op")
}
