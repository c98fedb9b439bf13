package graph

import (
	"math"
	"testing"

	"rgcpred/model"
)

// TestGorgoniaConvAgrees checks that the benchmark baseline (gorgonia's
// Conv2d) computes the same loss and gradients as the im2col + SGEMM
// kernel.
func TestGorgoniaConvAgrees(t *testing.T) {
	c := tinyConfig(model.HeadCat, false)
	w := randomWeights(t, c, 21)
	x, cells, tg := randomBatch(c, 3, 22)
	var loss [2]float32
	var grads [2]map[string][]float32
	for i, gc := range []bool{false, true} {
		g, err := New(w.Clone(), 3, Options{Training: true, Threads: 2, GorgoniaConv: gc})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetInputs(x, cells, tg); err != nil {
			t.Fatal(err)
		}
		if loss[i], err = g.Run(); err != nil {
			t.Fatal(err)
		}
		grads[i] = map[string][]float32{}
		for _, n := range g.TrainableNames() {
			grads[i][n] = append([]float32(nil), g.Grad(n)...)
		}
		g.Close()
	}
	if math.Abs(float64(loss[0]-loss[1])) > 1e-5 {
		t.Errorf("loss %.7f (sgemm) vs %.7f (gorgonia)", loss[0], loss[1])
	}
	for n, a := range grads[0] {
		for j, v := range a {
			if d := math.Abs(float64(v - grads[1][n][j])); d > 1e-4*math.Max(1, math.Abs(float64(v))) {
				t.Errorf("%s[%d]: %.6g (sgemm) vs %.6g (gorgonia)", n, j, v, grads[1][n][j])
				break
			}
		}
	}
}
