package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"rgcpred/model"
)

// The bf16 tests calibrate their tolerances on the model's own
// sensitivity. The CNN's gradients at these random weights are chaotic:
// multiplying every weight by 1 + 1e-6 N(0,1) moves them by about 0.6% in
// float32, by 1 + 2^-9 N(0,1) by about 20% (the transformer's and head's
// by 1-2%). bf16 arithmetic rounds every GEMM operand to 8 significant
// bits (relative error up to 2^-8, about 2^-9.3 rms), so its gradients can
// be no closer to float32 than those of weights perturbed by that much.
// The tests require them to be within 3 times the perturbed float32
// gradients' distance (bf16 also rounds activations and output gradients,
// which the perturbation does not).
const (
	bf16Perturb = 0x1p-9 // relative rms of the weight perturbation
	bf16Margin  = 3      // allowed ratio of bf16's error to the perturbation's
)

// perturbed returns a copy of w with every weight tensor multiplied
// elementwise by 1 + bf16Perturb N(0,1).
func perturbed(w *model.Weights, seed uint64) *model.Weights {
	p := w.Clone()
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, q := range p.Config.Params() {
		if q.Kind == model.KindWeight {
			for i := range p.Tensors[q.Name] {
				p.Tensors[q.Name][i] *= float32(1 + bf16Perturb*rng.NormFloat64())
			}
		}
	}
	return p
}

// groupDiffs returns |a - b| / |b| per group of layers (refGroup).
func groupDiffs(a, b map[string][]float32) map[string]float64 {
	diff, norm := map[string]float64{}, map[string]float64{}
	for n, bv := range b {
		k := refGroup(n)
		for i, v := range bv {
			d := float64(a[n][i] - v)
			diff[k] += d * d
			norm[k] += float64(v) * float64(v)
		}
	}
	r := map[string]float64{}
	for k := range norm {
		r[k] = math.Sqrt(diff[k] / norm[k])
	}
	return r
}

// TestBF16GradientsMatchReference checks the bf16 graph's gradients on
// gpt-a-cat-cpu against the float64 reference as TestGradientsMatchReference
// does for float32, with the float32 tolerance widened by bf16Margin times
// the change of the float32 directional derivative under the weight
// perturbation (see above): in the CNN groups about 20% of the gradient
// norm, in the others 1-2%.
func TestBF16GradientsMatchReference(t *testing.T) {
	t.Parallel()
	checkRefGradients(t, model.StemGPTA, model.HeadCat, model.CNNCPU, 2, true)
}

// TestBF16GradientsNearFP32 compares a training step in bf16 with float32
// on the same weights and batch (batch statistics, as in training), per
// group of layers: the relative L2 difference of the gradients must exceed
// 1e-4 (the GEMMs did round: float32 runs of the graph are
// deterministic) and stay within bf16Margin times that of float32 on
// perturbed weights, plus 1e-3; the loss likewise.
func TestBF16GradientsNearFP32(t *testing.T) {
	for _, cfg := range [][3]string{
		{model.StemGPTA, model.HeadCat, model.CNNCPU},
		{model.StemGPTB, model.HeadLogMix, model.CNNPaper},
	} {
		t.Run(fmt.Sprintf("%s-%s-%s", cfg[0], cfg[1], cfg[2]), func(t *testing.T) {
			c, err := model.NewConfig(cfg[0], cfg[1], cfg[2], 4)
			if err != nil {
				t.Fatal(err)
			}
			w := randomWeights(t, c, 31)
			x, cells, tg := randomBatch(c, 4, 32)
			opts := Options{Training: true, Threads: 2}
			l32, g32 := stepGrads(t, w.Clone(), x, cells, tg, opts, nil)
			lp, gp := stepGrads(t, perturbed(w, 33), x, cells, tg, opts, nil)
			opts.BF16 = true
			l16, g16 := stepGrads(t, w.Clone(), x, cells, tg, opts, nil)
			if d, dp := math.Abs(float64(l16-l32)), math.Abs(float64(lp-l32)); !(d <= bf16Margin*dp+1e-3*math.Abs(float64(l32))) {
				t.Errorf("loss %v in bf16, %v in float32 (%v on perturbed weights): |diff| %.3g, want <= %d x %.3g + 0.1%%",
					l16, l32, lp, d, bf16Margin, dp)
			}
			rp := groupDiffs(gp, g32)
			for k, r := range groupDiffs(g16, g32) {
				t.Logf("%s: |g_bf16 - g_fp32| / |g_fp32| = %.3g; perturbed weights %.3g", k, r, rp[k])
				if !(r > 1e-4 && r <= bf16Margin*rp[k]+1e-3) {
					t.Errorf("%s: relative gradient difference %.3g, want in (1e-4, %d x %.3g + 1e-3]", k, r, bf16Margin, rp[k])
				}
			}
		})
	}
}

// TestBF16Options checks that bf16 is refused with gorgonia's convolutions,
// which do not take the team's GEMMs.
func TestBF16Options(t *testing.T) {
	w := randomWeights(t, tinyConfig(model.HeadCat, false), 1)
	if _, err := New(w, 2, Options{Training: true, BF16: true, GorgoniaConv: true}); err == nil {
		t.Error("bf16 with gorgonia's convolutions: no error")
	}
}
