package rollout

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"rgcpred/rgc"
)

// TestTrainBlocksSumToCompare: every block counted once gives Compare's
// three metrics, for trains that fire, a silent one, and block lengths
// that divide the train or leave a remainder.
func TestTrainBlocksSumToCompare(t *testing.T) {
	const n = 6000
	rng := rand.New(rand.NewPCG(3, 4))
	train := func(p float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			if rng.Float64() < p {
				x[i] = 1
			}
		}
		return x
	}
	m, err := NewMetrics(20, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		g, r      []float64
		blockBins int
	}{
		{"both fire, 10 blocks", train(0.02), train(0.01), 600},
		{"remainder joins the last block", train(0.05), train(0.02), 700},
		{"one block", train(0.01), train(0.03), 0},
		{"silent prediction", make([]float64, n), train(0.02), 500},
	} {
		want, err := m.Compare(tc.g, tc.r)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := m.TrainBlocks(tc.g, tc.r, tc.blockBins)
		if err != nil {
			t.Fatal(err)
		}
		if nb := BlockCount(n, tc.blockBins); len(blocks) != nb {
			t.Errorf("%s: %d blocks, want %d", tc.name, len(blocks), nb)
		}
		bins := 0
		for _, b := range blocks {
			bins += b.Bins
		}
		got := BlockScores(blocks, nil)
		if bins != n || math.Abs(got.VanRossum-want.VanRossum) > 1e-9 || math.Abs(got.Schreiber-want.Schreiber) > 1e-9 ||
			math.Abs(got.Pearson-want.Pearson) > 1e-9 {
			t.Errorf("%s: blocks give %+v over %d bins, Compare %+v over %d", tc.name, got, bins, want, n)
		}
	}
}

// TestNLLBlocksSumToNLL: the blocks' windows and NLL sums give NLL's
// per-cell means, and the means NLLBlocks returns are NLL's exactly.
func TestNLLBlocksSumToNLL(t *testing.T) {
	const bins = 20_000
	rec := testRecording(bins, every(bins, 100, 3), every(bins, 37, 1))
	opts := Options{Split: rgc.Train, Cells: []int{0, 1}, MaxBatch: 50}
	want, err := NLL(context.Background(), rec, rampPredictor{}, opts, 3)
	if err != nil {
		t.Fatal(err)
	}
	means, blocks, err := NLLBlocks(context.Background(), rec, rampPredictor{}, opts, 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	_, _, nw := rec.WindowRange(rgc.Train)
	for i, cb := range blocks {
		windows := 0
		for _, b := range cb {
			windows += b.Windows
		}
		if got := BlockNLL(cb, nil); len(cb) != BlockCount(nw, 1000) || windows != (nw+2)/3 || math.Abs(got-want[i]) > 1e-12 || means[i] != want[i] {
			t.Errorf("cell %d: %d blocks, %d windows, NLL %v; want %d, %d, %v", i, len(cb), windows, got, BlockCount(nw, 1000), (nw+2)/3, want[i])
		}
	}
}

// TestBlockBootstrapWidens: per-cell values that are means over time
// blocks. When the blocks share an effect across cells (a stretch that
// every cell finds hard), resampling cells alone cannot see it and the
// block x cell interval is many times wider; when the blocks are
// independent it is wider only by the two-way bootstrap's known excess for
// independent entries, which count up to three times in its variance
// (McCullagh 2000, Bernoulli 6:285).
func TestBlockBootstrapWidens(t *testing.T) {
	const cells, blocks = 60, 16
	for _, tc := range []struct {
		name             string
		shared, own      float64 // standard deviations of the block effect and of the cell-block noise
		minRatio, maxRat float64
	}{
		{"blocks shared by all cells", 1, 0.2, 5, math.Inf(1)},
		{"independent blocks", 0, 1, 1.2, 2.6},
	} {
		rng := rand.New(rand.NewPCG(7, 8))
		x := make([][]float64, cells)
		effect := make([]float64, blocks)
		for k := range effect {
			effect[k] = tc.shared * rng.NormFloat64()
		}
		means := make([]float64, cells)
		for c := range x {
			x[c] = make([]float64, blocks)
			for k := range x[c] {
				x[c][k] = effect[k] + tc.own*rng.NormFloat64()
				means[c] += x[c][k] / blocks
			}
		}
		value := func(c int, w []float64) float64 {
			var s float64
			for k, wk := range w {
				s += wk * x[c][k]
			}
			return s / blocks
		}
		cellOnly, err := Bootstrap(means, DefaultResamples, 1)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi, err := BlockBootstrap(cells, blocks, value, DefaultResamples, 1)
		if err != nil {
			t.Fatal(err)
		}
		ratio := (hi - lo) / (cellOnly.Hi - cellOnly.Lo)
		if ratio < tc.minRatio || ratio > tc.maxRat || lo > cellOnly.IQM || hi < cellOnly.IQM {
			t.Errorf("%s: block x cell [%.4f, %.4f] is %.2f times the cell-only [%.4f, %.4f], want %g to %g, around IQM %.4f",
				tc.name, lo, hi, ratio, cellOnly.Lo, cellOnly.Hi, tc.minRatio, tc.maxRat, cellOnly.IQM)
		}
		t.Logf("%s: width ratio %.2f", tc.name, ratio)
	}
	if _, _, err := BlockBootstrap(3, 2, func(int, []float64) float64 { return math.NaN() }, DefaultResamples, 1); err == nil {
		t.Error("a NaN value was accepted")
	}
	if _, _, err := BlockBootstrap(3, 2, func(int, []float64) float64 { return 0 }, 10, 1); err == nil {
		t.Error("10 resamples were accepted")
	}
}
