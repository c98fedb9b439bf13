package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"rgcpred/model"
)

// tiny is a small but complete configuration (every layer kind, a
// projection, the logmix head) whose weights tests can write by hand.
func tiny() model.Config {
	return model.Config{
		Stem: model.StemGPTA, Head: model.HeadLogMix, NumCells: 2,
		InRows: 5, InBins: 1024, StemCh: 2, StemKernel: 3,
		BlockMid: 4, BlockOut: 4, BlockKernel: 3, SEReduction: 2,
		Layers: 1, Heads: 2, HeadDim: 3, Mixtures: 3, Classes: 81,
	}
}

func newNet(t *testing.T, w *model.Weights) *Net {
	t.Helper()
	n, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConv1d checks the convolution's geometry against sums written out by
// hand: "same" zero padding k/2 and output position o reading inputs
// o*s - k/2 .. o*s + k/2.
func TestConv1d(t *testing.T) {
	c := tiny()
	w := model.NewWeights(c)
	// conv1 is [StemCh=2, InRows=5, k=3]; give output channel 1 the kernel
	// (1, 2, 3) on input row 0 and nothing else.
	k := w.Get(model.LayerConv1.Weight())
	copy(k[(1*5+0)*3:], []float32{1, 2, 3})
	n := newNet(t, w)
	x := make([][]float64, 5)
	for r := range x {
		x[r] = make([]float64, 8)
	}
	copy(x[0], []float64{1, 10, 100, 1000, 0, 0, 0, 5})
	for _, tc := range []struct {
		stride int
		want   []float64
	}{
		// o=0 reads x[-1..1] = (0, 1, 10) -> 0*1 + 1*2 + 10*3 = 32, etc.
		{1, []float64{32, 321, 3210, 2100, 1000, 0, 15, 10}},
		{2, []float64{32, 3210, 1000, 15}},
	} {
		y := n.conv1d(x, model.LayerConv1, tc.stride)
		if len(y) != 2 || len(y[1]) != len(tc.want) {
			t.Fatalf("stride %d: output %d x %d, want 2 x %d", tc.stride, len(y), len(y[1]), len(tc.want))
		}
		for o, v := range tc.want {
			if y[1][o] != v || y[0][o] != 0 {
				t.Errorf("stride %d position %d: channels (%v, %v), want (0, %v)", tc.stride, o, y[0][o], y[1][o], v)
			}
		}
	}
}

// TestNorms checks batch norm (running statistics) and layer norm against
// their formulas on small inputs, within 1e-12.
func TestNorms(t *testing.T) {
	c := tiny()
	w := model.NewWeights(c)
	copy(w.Get(model.LayerBN1.RunningMean()), []float32{1, -2})
	copy(w.Get(model.LayerBN1.RunningVar()), []float32{4, 0.25})
	copy(w.Get(model.LayerBN1.Weight()), []float32{2, 1})
	copy(w.Get(model.LayerBN1.Bias()), []float32{0.5, 0})
	n := newNet(t, w)
	x := n.batchNorm([][]float64{{3, 1}, {-2, 0}}, model.LayerBN1)
	eps := model.BNEps
	want := [][]float64{
		{(3-1)/math.Sqrt(4+eps)*2 + 0.5, (1-1)/math.Sqrt(4+eps)*2 + 0.5},
		{0, 2 / math.Sqrt(0.25+eps)},
	}
	for ch := range want {
		for j := range want[ch] {
			if math.Abs(x[ch][j]-want[ch][j]) > 1e-12 {
				t.Errorf("batch norm [%d][%d] = %v, want %v", ch, j, x[ch][j], want[ch][j])
			}
		}
	}
	// Layer norm with unit scale and zero shift: zero mean, unit variance
	// (up to eps).
	y := n.layerNorm([]float64{1, 2, 3, 4, 5, 6}, model.LayerLNF)
	var mean, vr float64
	for _, v := range y {
		mean += v / 6
	}
	for _, v := range y {
		vr += (v - mean) * (v - mean) / 6
	}
	if math.Abs(mean) > 1e-12 || math.Abs(vr-35.0/12/(35.0/12+model.LNEps)) > 1e-12 {
		t.Errorf("layer norm: mean %v, variance %v", mean, vr)
	}
}

// TestGELUAndSoftmax checks GELU against published values of its tanh form
// and softmax against a direct computation.
func TestGELUAndSoftmax(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{0, 0}, {1, 0.8411919906082768}, {-1, -0.15880800939172324}, {3, 2.996362607918227},
	} {
		if got := gelu(tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("gelu(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	x := []float64{1000, 1001, 999}
	softmax(x)
	e := []float64{math.Exp(-1), 1, math.Exp(-2)}
	z := e[0] + e[1] + e[2]
	for i := range x {
		if math.Abs(x[i]-e[i]/z) > 1e-15 {
			t.Errorf("softmax[%d] = %v, want %v", i, x[i], e[i]/z)
		}
	}
}

// TestForwardWiring: with every weight zero (norm scales and running
// variances 1) every layer outputs zero, so the head outputs must be the
// head's bias exactly; and adding a constant to the cell embedding of one
// row must change that row's outputs only.
func TestForwardWiring(t *testing.T) {
	c := tiny()
	w := model.NewWeights(c)
	rng := rand.New(rand.NewPCG(1, 2))
	bias := w.Get(model.LayerHead.Bias())
	for i := range bias {
		bias[i] = float32(rng.NormFloat64())
	}
	window := make([]float32, c.InRows*c.InBins)
	for i := range window {
		window[i] = float32(rng.Float64())
	}
	n := newNet(t, w)
	for cell := 0; cell < c.NumCells; cell++ {
		out := n.Forward(window, cell)
		if len(out) != c.HeadOut() {
			t.Fatalf("%d head outputs, want %d", len(out), c.HeadOut())
		}
		for i, v := range out {
			if v != float64(bias[i]) {
				t.Fatalf("cell %d output %d = %v, want the bias %v", cell, i, v, bias[i])
			}
		}
	}

	// Random head weights and a cell embedding for row 1 only: row 0 keeps
	// the bias, row 1 moves.
	w2 := w.Clone()
	for _, name := range []string{model.LayerHead.Weight(), model.ParamCellEmb, model.LayerLNF.Weight()} {
		v := w2.Get(name)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}
	emb := w2.Get(model.ParamCellEmb)
	clear(emb[:c.Width()])
	n2 := newNet(t, w2)
	out0, out1 := n2.Forward(window, 0), n2.Forward(window, 1)
	var moved float64
	for i := range out0 {
		if out0[i] != float64(bias[i]) {
			t.Fatalf("cell 0 output %d = %v, want the bias %v", i, out0[i], bias[i])
		}
		moved = math.Max(moved, math.Abs(out1[i]-out0[i]))
	}
	if moved < 0.1 {
		t.Errorf("cell 1's embedding moved the outputs by at most %g", moved)
	}
	p := n2.Probs(window, 1)
	if err := model.CheckDist(p); err != nil {
		t.Error(err)
	}
}

// TestNewRejectsBadWeights: New refuses weights that fail model.Weights.Check.
func TestNewRejectsBadWeights(t *testing.T) {
	w := model.NewWeights(tiny())
	delete(w.Tensors, model.LayerHead.Bias())
	if _, err := New(w); err == nil {
		t.Error("New accepted weights without head.bias")
	}
	if _, err := New(nil); err == nil {
		t.Error("New accepted nil weights")
	}
}
