package graph

import (
	"math"
	"testing"

	"rgcpred/model"
)

// TestSoftTargets checks the distillation path: a graph with SoftTargets fed
// one-hot rows by SetInputs gives the plain graph's loss and gradients, a
// uniform mixture of two one-hot batches gives the mean of their losses, and
// malformed distributions are refused.
func TestSoftTargets(t *testing.T) {
	c := tinyConfig(model.HeadCat, false)
	const batch = 4
	x, cells, tg := randomBatch(c, batch, 3)
	run := func(soft bool, set func(g *Graph) error) (float32, map[string][]float32) {
		t.Helper()
		return stepGrads(t, randomWeights(t, c, 7), x, cells, tg, Options{Training: true, Threads: 2, SoftTargets: soft}, set)
	}
	plain, pg := run(false, nil)
	soft, sg := run(true, nil)
	if math.Abs(float64(plain-soft)) > 1e-6 {
		t.Errorf("one-hot soft loss %.7f, plain loss %.7f", soft, plain)
	}
	for n, gv := range pg {
		for i := range gv {
			if math.Abs(float64(gv[i]-sg[n][i])) > 1e-6*math.Max(1, math.Abs(float64(gv[i]))) {
				t.Fatalf("%s[%d]: soft-target gradient %g, plain %g", n, i, sg[n][i], gv[i])
			}
		}
	}

	// Half the mass on the true class, half on class 80: the loss is the
	// mean of the two one-hot losses.
	other := make([]int, batch)
	for i := range other {
		other[i] = c.Classes - 1
	}
	tgSave := tg
	tg = other
	lossOther, _ := run(false, nil)
	tg = tgSave
	half := make([]float32, batch*c.Classes)
	for i := 0; i < batch; i++ {
		half[i*c.Classes+tg[i]] += 0.5
		half[i*c.Classes+c.Classes-1] += 0.5
	}
	mixed, _ := run(true, func(g *Graph) error { return g.SetTargetDist(half) })
	if want := (plain + lossOther) / 2; math.Abs(float64(mixed-want)) > 1e-5 {
		t.Errorf("half-half loss %.6f, want %.6f", mixed, want)
	}

	w := randomWeights(t, c, 7)
	g, err := New(w, batch, Options{Training: true, Threads: 1, SoftTargets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bad := func(mod func(p []float32)) []float32 {
		p := append([]float32(nil), half...)
		mod(p)
		return p
	}
	for name, p := range map[string][]float32{
		"short":    half[:len(half)-1],
		"negative": bad(func(p []float32) { p[0], p[1] = -0.5, p[1]+1 }),
		"NaN":      bad(func(p []float32) { p[3] = float32(math.NaN()) }),
		"sum 0.9":  bad(func(p []float32) { p[c.Classes-1] -= 0.1 }),
	} {
		if err := g.SetTargetDist(p); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	plainG, err := New(w, batch, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plainG.Close()
	if err := plainG.SetTargetDist(half); err == nil {
		t.Error("want an error for target distributions without SoftTargets")
	}
	if _, err := New(randomWeights(t, tinyConfig(model.HeadLogMix, false), 7), batch, Options{SoftTargets: true}); err == nil {
		t.Error("want an error for soft targets with the logmix head")
	}
}
