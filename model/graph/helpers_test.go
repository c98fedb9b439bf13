package graph

import (
	"math/rand/v2"
	"testing"

	"rgcpred/model"
)

// tinyConfig is a small but complete configuration: every layer type, a
// projection when proj is true, either head.
func tinyConfig(head string, proj bool) model.Config {
	c := model.Config{
		Stem: model.StemGPTA, Head: head, NumCells: 3,
		InRows: 5, InBins: 1024, StemCh: 2, StemKernel: 5,
		BlockMid: 4, BlockOut: 4, BlockKernel: 3, SEReduction: 2,
		Layers: 1, Heads: 2, HeadDim: 2, Mixtures: 3, Classes: 81,
	}
	if proj {
		c.HeadDim = 3
	}
	return c
}

// randomWeights initialises w and perturbs the norms and running statistics
// so that every parameter matters.
func randomWeights(t testing.TB, c model.Config, seed uint64) *model.Weights {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	w := model.InitWeights(c, rng)
	for _, p := range c.Params() {
		v := w.Tensors[p.Name]
		switch {
		case p.Kind == model.KindStat && p.Name[len(p.Name)-3:] == "var":
			for i := range v {
				v[i] = 0.5 + rng.Float32()
			}
		case p.Kind != model.KindWeight:
			for i := range v {
				v[i] += 0.1 * float32(rng.NormFloat64())
			}
		default:
			for i := range v {
				v[i] *= 3 // larger transformer weights: non-trivial attention
			}
		}
	}
	return w
}

// randomBatch returns n windows with stimulus noise and sparse spikes, cell
// indices and targets.
func randomBatch(c model.Config, n int, seed uint64) ([]float32, []int, []int) {
	rng := rand.New(rand.NewPCG(seed, 2))
	x := make([]float32, n*c.InRows*c.InBins)
	for i := range x {
		row := (i / c.InBins) % c.InRows
		if row == c.InRows-1 {
			if rng.Float64() < 0.02 {
				x[i] = 1
			}
		} else if rng.Float64() < 0.5 {
			x[i] = 1
		}
	}
	cells, tg := make([]int, n), make([]int, n)
	for i := range cells {
		cells[i] = rng.IntN(c.NumCells)
		tg[i] = rng.IntN(c.Classes)
	}
	return x, cells, tg
}

// stepGrads runs one training step of w on a batch (set, if not nil,
// changes the graph's inputs before the run) and returns the loss and a
// copy of every gradient.
func stepGrads(t *testing.T, w *model.Weights, x []float32, cells, tg []int, opts Options, set func(g *Graph) error) (float32, map[string][]float32) {
	t.Helper()
	g, err := New(w, len(cells), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.SetInputs(x, cells, tg); err != nil {
		t.Fatal(err)
	}
	if set != nil {
		if err := set(g); err != nil {
			t.Fatal(err)
		}
	}
	loss, err := g.Run()
	if err != nil {
		t.Fatal(err)
	}
	grads := map[string][]float32{}
	for _, n := range g.TrainableNames() {
		grads[n] = append([]float32(nil), g.Grad(n)...)
	}
	return loss, grads
}
