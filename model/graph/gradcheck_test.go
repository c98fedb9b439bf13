package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"rgcpred/model"
)

// TestGraphGradient checks the gradients that gorgonia's symbolic
// differentiation builds for the whole tiny model (training mode) against
// central finite differences of the loss, for both heads, with and without
// the projection. ReLU is replaced by softplus here (finite differences
// across ReLU kinks are inexact); TestKernelGradients checks every kernel
// on its own.
func TestGraphGradient(t *testing.T) {
	// One layer runs only the last block's last-query attention; two run
	// full attention before it.
	for _, tc := range []struct {
		head   string
		proj   bool
		layers int
	}{{model.HeadCat, false, 1}, {model.HeadCat, true, 1}, {model.HeadLogMix, false, 1}, {model.HeadLogMix, true, 1}, {model.HeadCat, false, 2}} {
		t.Run(fmt.Sprintf("%s/proj=%v/layers=%d", tc.head, tc.proj, tc.layers), func(t *testing.T) {
			c := tinyConfig(tc.head, tc.proj)
			c.Layers = tc.layers
			w := randomWeights(t, c, 7)
			g, err := New(w, 4, Options{Training: true, Threads: 2, smooth: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			x, cells, tg := randomBatch(c, 4, 3)
			if err := g.SetInputs(x, cells, tg); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Run(); err != nil {
				t.Fatal(err)
			}
			grads := map[string][]float32{}
			for _, n := range g.TrainableNames() {
				gv := g.Grad(n)
				if gv == nil {
					t.Fatalf("no gradient for %s", n)
				}
				grads[n] = append([]float32(nil), gv...)
			}
			// Directional derivatives, one random direction per tensor: the
			// ReLU kinks and float32 rounding average out over many
			// coordinates, while any wrongly chained gradient shows.
			rng := rand.New(rand.NewPCG(5, 5))
			const eps = 1e-3
			checked := 0
			for _, n := range g.TrainableNames() {
				v := w.Tensors[n]
				old := append([]float32(nil), v...)
				d := make([]float64, len(v))
				var an, norm float64
				for i := range d {
					d[i] = rng.NormFloat64()
					an += d[i] * float64(grads[n][i])
					norm += d[i] * d[i]
				}
				run := func(sign float64) float64 {
					for i := range v {
						v[i] = old[i] + float32(sign*eps*d[i])
					}
					l, err := g.Run()
					if err != nil {
						t.Fatal(err)
					}
					return float64(l)
				}
				num := (run(1) - run(-1)) / (2 * eps)
				copy(v, old)
				checked++
				if math.Abs(num-an) > 0.03*math.Abs(num)+1.5e-3+2e-3*math.Sqrt(norm) {
					t.Errorf("%s: directional derivative analytic %.6g, numeric %.6g", n, an, num)
				}
			}
			t.Logf("%d tensors checked", checked)
		})
	}
}

// kernelCase is one kernel with inputs for a finite-difference check.
type kernelCase struct {
	name string
	k    kernel
	in   []*tensor.Dense
}

func randTensor(rng *rand.Rand, scale float64, shape ...int) *tensor.Dense {
	t := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(shape...))
	for i, d := 0, f32(t); i < len(d); i++ {
		d[i] = float32(rng.NormFloat64() * scale)
	}
	return t
}

func constTensor(vals ...float32) *tensor.Dense {
	return tensor.New(tensor.WithBacking(vals), tensor.WithShape(len(vals)))
}

// TestKernelGradients checks every kernel's vector-Jacobian products
// against central differences of a random projection of its output,
// evaluated in float64.
func TestKernelGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	pos := func(n int) *tensor.Dense {
		t := randTensor(rng, 0.3, n)
		for i, d := 0, f32(t); i < len(d); i++ {
			d[i] = 0.5 + float32(math.Abs(float64(d[i])))
		}
		return t
	}
	cases := []kernelCase{
		{"conv k5 s2 p2", &conv1d{stride: 2, pad: 2, par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 3, 2, 11), randTensor(rng, 1, 4, 2, 5)}},
		{"conv k3 s1 p1", &conv1d{stride: 1, pad: 1, par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 8), randTensor(rng, 1, 2, 3, 3)}},
		{"conv 1x1", &conv1d{stride: 1, par: parallel{n: 1}}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 6), randTensor(rng, 1, 4, 3, 1)}},
		{"conv 1x1 s2", &conv1d{stride: 2, par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 6), randTensor(rng, 1, 4, 3, 1)}},
		{"batchnorm train", &batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: testPar(t, 2)},
			[]*tensor.Dense{randTensor(rng, 1, 3, 2, 5), randTensor(rng, 1, 2), randTensor(rng, 1, 2), randTensor(rng, 1, 2), pos(2)}},
		{"batchnorm eval", &batchNorm{eps: 1e-5, momentum: 0.1, par: testPar(t, 2)},
			[]*tensor.Dense{randTensor(rng, 1, 3, 2, 5), randTensor(rng, 1, 2), randTensor(rng, 1, 2), randTensor(rng, 1, 2), pos(2)}},
		{"batchnorm+relu train", &bnReLU{bn: batchNorm{training: true, eps: 1e-5, momentum: 0.1, par: testPar(t, 2)}},
			[]*tensor.Dense{randTensor(rng, 1, 3, 2, 5), randTensor(rng, 1, 2), randTensor(rng, 1, 2), randTensor(rng, 1, 2), pos(2)}},
		{"batchnorm+relu eval", &bnReLU{bn: batchNorm{eps: 1e-5, momentum: 0.1, par: testPar(t, 2)}},
			[]*tensor.Dense{randTensor(rng, 1, 3, 2, 5), randTensor(rng, 1, 2), randTensor(rng, 1, 2), randTensor(rng, 1, 2), pos(2)}},
		{"meanlen", meanLen{}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 4)}},
		{"exciteadd", &exciteAdd{par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 4), randTensor(rng, 1, 2, 3), randTensor(rng, 1, 2, 3, 4)}},
		{"linear", linear{}, []*tensor.Dense{randTensor(rng, 1, 3, 4), randTensor(rng, 1, 4, 5), randTensor(rng, 1, 5)}},
		{"totokens", toTokens{}, []*tensor.Dense{randTensor(rng, 1, 2, 3, 4)}},
		{"embed", embed{}, []*tensor.Dense{randTensor(rng, 1, 6, 2), randTensor(rng, 1, 3, 2), randTensor(rng, 1, 4, 2), constTensor(3, 1)}},
		{"layernorm", &layerNorm{eps: 1e-5}, []*tensor.Dense{randTensor(rng, 1, 3, 5), randTensor(rng, 1, 5), randTensor(rng, 1, 5)}},
		{"attention", &attention{t: 4, heads: 2, hd: 3, par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 8, 18)}},
		{"attention last query", &attention{t: 4, heads: 2, hd: 3, last: true, par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 8, 18)}},
		{"relu", &relu{par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 1, 3, 4)}},
		{"softplus", softplus{}, []*tensor.Dense{randTensor(rng, 2, 3, 4)}},
		{"gelu", &gelu{par: testPar(t, 2)}, []*tensor.Dense{randTensor(rng, 2, 3, 4)}},
		{"lasttoken", lastToken{t: 3}, []*tensor.Dense{randTensor(rng, 1, 6, 2)}},
		{"catnll", catNLL{}, []*tensor.Dense{randTensor(rng, 3, 3, 81), constTensor(0, 40, 80)}},
		{"catce", catCE{}, []*tensor.Dense{randTensor(rng, 3, 3, 81), randDist(rng, 3, 81)}},
		{"logmixnll", logMixNLL{m: 3, horizon: 80}, []*tensor.Dense{logMixParams(rng, 4, 3), constTensor(0, 7, 79, 80)}},
		{"logmixnll far tail", logMixNLL{m: 2, horizon: 80}, []*tensor.Dense{constTensor(0.3, -0.2, 0, 0.5, -1.5, -1), constTensor(80)}},
	}
	// The far-tail case needs a [1, 6] matrix.
	cases[len(cases)-1].in[0].Reshape(1, 6)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkKernel(t, tc) })
	}
}

// randDist returns b random distributions over k classes, as a [b, k]
// matrix.
func randDist(rng *rand.Rand, b, k int) *tensor.Dense {
	d := make([]float32, b*k)
	for r := 0; r < b; r++ {
		var sum float32
		for j := range k {
			v := float32(rng.ExpFloat64())
			d[r*k+j], sum = v, sum+v
		}
		for j := range k {
			d[r*k+j] /= sum
		}
	}
	return tensor.New(tensor.WithBacking(d), tensor.WithShape(b, k))
}

func logMixParams(rng *rand.Rand, b, m int) *tensor.Dense {
	p := randTensor(rng, 1, b, 3*m)
	d := f32(p)
	for r := 0; r < b; r++ {
		for c := 0; c < m; c++ {
			d[r*3*m+m+c] = float32(1 + 3*rng.Float64())      // mu: medians e^1..e^4 bins
			d[r*3*m+2*m+c] = float32(-1 + 1.2*rng.Float64()) // log sigma
		}
	}
	return p
}

// kernelOutShape is the output shape of tc's kernel on tc's inputs.
func kernelOutShape(t *testing.T, tc kernelCase) tensor.Shape {
	t.Helper()
	shapes := make([]tensor.Shape, len(tc.in))
	for i, x := range tc.in {
		shapes[i] = x.Shape()
	}
	os, err := tc.k.outShape(shapes)
	if err != nil {
		t.Fatal(err)
	}
	return os
}

func checkKernel(t *testing.T, tc kernelCase) {
	os := kernelOutShape(t, tc)
	out := make([]float32, os.TotalSize())
	rng := rand.New(rand.NewPCG(3, 4))
	r := make([]float32, len(out))
	for i := range r {
		r[i] = float32(rng.NormFloat64())
	}
	loss := func() float64 {
		tc.k.forward(tc.in, out)
		var s float64
		for i, v := range out {
			s += float64(v) * float64(r[i])
		}
		return s
	}
	loss()
	fwd := append([]float32(nil), out...)
	for i, d := range tc.k.diffWRT() {
		if !d {
			continue
		}
		gin := make([]float32, tc.in[i].Shape().TotalSize())
		for j := range gin {
			gin[j] = float32(math.NaN()) // must be fully written
		}
		loss() // kernels may reuse their last forward pass's statistics
		tc.k.backward(i, tc.in, fwd, r, gin)
		x := f32(tc.in[i])
		const eps = 1e-3
		for j := range x {
			old := x[j]
			x[j] = old + eps
			lp := loss()
			x[j] = old - eps
			lm := loss()
			x[j] = old
			num := (lp - lm) / (2 * eps)
			if an := float64(gin[j]); !(math.Abs(an-num) <= 2e-3*math.Max(1, math.Abs(num))) {
				t.Errorf("input %d [%d]: analytic %.6g, numeric %.6g", i, j, an, num)
			}
		}
	}
}

// TestLossMatchesModel checks the heads' training losses against the
// definitions in package model (model.NLL of model.CatProbs and
// model.LogMixDensityNLL), including extreme parameters.
func TestLossMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const m = 4
	p := logMixParams(rng, 5, m)
	d := f32(p)
	d[2*m] = -40 // clamped log sigma
	d[3*m+m] = 30
	tg := constTensor(0, 3, 79, 80, 80)
	out := make([]float32, 5)
	logMixNLL{m: m, horizon: 80}.forward([]*tensor.Dense{p, tg}, out)
	for b := 0; b < 5; b++ {
		want := model.LogMixDensityNLL(d[b*3*m:(b+1)*3*m], m, int(f32(tg)[b]))
		if math.Abs(float64(out[b])-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("logmix window %d: kernel %.6g, model %.6g", b, out[b], want)
		}
	}
	logits := randTensor(rng, 5, 3, 81)
	ct := constTensor(0, 40, 80)
	catNLL{}.forward([]*tensor.Dense{logits, ct}, out[:3])
	probs := make([]float32, 81)
	for b := 0; b < 3; b++ {
		model.CatProbs(f32(logits)[b*81:(b+1)*81], probs)
		want := model.NLL(probs, int(f32(ct)[b]))
		if math.Abs(float64(out[b])-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("cat window %d: kernel %.6g, model %.6g", b, out[b], want)
		}
	}
	// The cross-entropy against a distribution is the expected NLL.
	dist := randDist(rng, 3, 81)
	catCE{}.forward([]*tensor.Dense{logits, dist}, out[:3])
	for b := 0; b < 3; b++ {
		model.CatProbs(f32(logits)[b*81:(b+1)*81], probs)
		var want float64
		for k, pk := range f32(dist)[b*81 : (b+1)*81] {
			want += float64(pk) * model.NLL(probs, k)
		}
		if math.Abs(float64(out[b])-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("cat cross-entropy window %d: kernel %.6g, model %.6g", b, out[b], want)
		}
	}
}
