package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/ref"
)

// TestGradientsMatchReference checks the graph's gradients on every
// configuration (both stems, both heads, both CNN presets) at full size
// against the float64 reference (model/ref): for each group of layers (CNN
// stem, CNN blocks, transformer input, transformer blocks, output head) the
// directional derivative of the graph's gradient along a random direction
// must match central differences of the reference's loss: within 3% of
// the reference plus 2% of the group's gradient norm (the spread of a
// directional derivative along a random direction; the worst seen is 1.7%,
// from ReLU kinks inside the step). Batch norm uses its running statistics on
// both sides (the reference's inference mode); TestKernelGradients checks
// the batch-statistics backward pass. gpt-a with the cpu CNN runs two
// windows of different cells, the others one (the reference takes up to a
// second per window).
func TestGradientsMatchReference(t *testing.T) {
	for _, stem := range []string{model.StemGPTA, model.StemGPTB} {
		for _, head := range []string{model.HeadCat, model.HeadLogMix} {
			for _, cnn := range []string{model.CNNPaper, model.CNNCPU} {
				t.Run(fmt.Sprintf("%s-%s-%s", stem, head, cnn), func(t *testing.T) {
					t.Parallel()
					batch := 1
					if stem == model.StemGPTA && cnn == model.CNNCPU {
						batch = 2
					}
					checkRefGradients(t, stem, head, cnn, batch, false)
				})
			}
		}
	}
}

// refGroup names the group of layers a parameter belongs to.
func refGroup(name string) string {
	switch {
	case strings.HasPrefix(name, "cnn.blocks."):
		return "cnn blocks"
	case strings.HasPrefix(name, "cnn."):
		return "cnn stem"
	case strings.HasPrefix(name, "gpt.blocks."):
		return "gpt blocks"
	case strings.HasPrefix(name, "gpt.ln_f"), strings.HasPrefix(name, "head."):
		return "head"
	case strings.HasPrefix(name, "gpt."):
		return "gpt input"
	}
	return name
}

// checkRefGradients checks the gradients of one configuration against the
// float64 reference (see TestGradientsMatchReference), with the GEMMs in
// bf16 arithmetic if bf16 (tolerances widened by the float32 gradients'
// change under a bf16-sized weight perturbation, see
// TestBF16GradientsMatchReference).
func checkRefGradients(t *testing.T, stem, head, cnn string, batch int, bf16 bool) {
	c, err := model.NewConfig(stem, head, cnn, 4)
	if err != nil {
		t.Fatal(err)
	}
	w := randomWeights(t, c, 21)
	// randomWeights triples every weight; with batch norm on running
	// statistics that compounds over the encoder's layers into activations
	// so large that the loss is kinked at any usable step. The encoder
	// keeps its initial scale here.
	for _, p := range c.Params() {
		if p.Kind == model.KindWeight && strings.HasPrefix(p.Name, "cnn.") {
			for i, v := range w.Tensors[p.Name] {
				w.Tensors[p.Name][i] = v / 3
			}
		}
	}
	x, cells, tg := randomBatch(c, batch, 22)
	if batch > 1 {
		cells[1] = (cells[0] + 1) % c.NumCells
	}
	g, err := New(w, batch, Options{Training: true, Threads: 1, frozenBN: true, BF16: bf16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.SetInputs(x, cells, tg); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(); err != nil {
		t.Fatal(err)
	}
	var g32, gp map[string][]float32 // bf16: float32 gradients, on w and on perturbed w
	if bf16 {
		opts := Options{Training: true, Threads: 1, frozenBN: true}
		_, g32 = stepGrads(t, w.Clone(), x, cells, tg, opts, nil)
		_, gp = stepGrads(t, perturbed(w, 24), x, cells, tg, opts, nil)
	}
	// refLoss is the mean NLL of the batch under the reference.
	win := c.InRows * c.InBins
	refLoss := func() float64 {
		net, err := ref.New(w)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for i := 0; i < batch; i++ {
			out := net.Forward(x[i*win:(i+1)*win], cells[i])
			if c.Head == model.HeadCat {
				mx := math.Inf(-1)
				for _, v := range out {
					mx = math.Max(mx, v)
				}
				var s float64
				for _, v := range out {
					s += math.Exp(v - mx)
				}
				sum += mx + math.Log(s) - out[tg[i]]
				continue
			}
			o32 := make([]float32, len(out))
			for j, v := range out {
				o32[j] = float32(v)
			}
			sum += model.LogMixDensityNLL(o32, c.Mixtures, tg[i])
		}
		return sum / float64(batch)
	}
	groups := map[string][]string{}
	var order []string
	for _, n := range g.TrainableNames() {
		k := refGroup(n)
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], n)
	}
	rng := rand.New(rand.NewPCG(23, 23))
	// Steps of 1e-5: the reference is float64 and the float32 weights hold
	// such a step to about 0.2% per element; steps of 1e-4 and more cross
	// enough ReLU kinks in the encoder to bend the difference quotient by
	// 5-20%.
	const eps = 1e-5
	for _, k := range order {
		dir := map[string][]float64{}
		old := map[string][]float32{}
		var an, gnorm, sens float64
		for _, n := range groups[k] {
			gv := g.Grad(n)
			if gv == nil {
				t.Fatalf("no gradient for %s", n)
			}
			d := make([]float64, len(gv))
			for i := range d {
				d[i] = rng.NormFloat64()
				an += d[i] * float64(gv[i])
				gnorm += float64(gv[i]) * float64(gv[i])
				if bf16 {
					sens += d[i] * float64(gp[n][i]-g32[n][i])
				}
			}
			dir[n], old[n] = d, append([]float32(nil), w.Tensors[n]...)
		}
		shift := func(sign float64) {
			for n, d := range dir {
				v := w.Tensors[n]
				for i := range v {
					v[i] = old[n][i] + float32(sign*eps*d[i])
				}
			}
		}
		shift(1)
		up := refLoss()
		shift(-1)
		down := refLoss()
		for n := range dir {
			copy(w.Tensors[n], old[n])
		}
		num := (up - down) / (2 * eps)
		gnorm = math.Sqrt(gnorm)
		t.Logf("%s (%d tensors): graph %.6g, reference %.6g, gradient norm %.4g: off by %.2g of the norm", k, len(groups[k]), an, num, gnorm, math.Abs(num-an)/gnorm)
		if bf16 {
			t.Logf("%s: float32 on perturbed weights moves the directional derivative by %.2g of the norm", k, math.Abs(sens)/gnorm)
		}
		if math.Abs(num-an) > 0.03*math.Abs(num)+0.02*gnorm+bf16Margin*math.Abs(sens)+1e-6 {
			t.Errorf("%s: directional derivative of the graph %.6g, of the float64 reference %.6g", k, an, num)
		}
	}
}
