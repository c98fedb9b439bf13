package rollout

import (
	"errors"
	"fmt"
	"math"
)

// Time blocks: the scores of a cell split into consecutive blocks of the
// scored stretch as additive sums, so that each metric can be recomputed
// over any multiset of blocks (a block bootstrap, BlockBootstrap). All
// cells share the stimulus and the stretch, so scores of different cells
// in the same block are correlated; resampling blocks as well as cells
// carries that correlation into the interval.

// BlockCount returns the number of blocks of blockBins bins in n bins: the
// remainder joins the last block, and there is at least one.
func BlockCount(n, blockBins int) int {
	if blockBins <= 0 {
		return 1
	}
	return max(1, n/blockBins)
}

// blockOf returns the block of bin i of n (BlockCount blocks).
func blockOf(i, nBlocks, blockBins int) int {
	if blockBins <= 0 {
		return 0
	}
	return min(i/blockBins, nBlocks-1)
}

// TrainBlock holds one block's part of the spike-train metrics between a
// generated train g and a recorded train r (Metrics.Compare), as sums over
// the block's bins.
type TrainBlock struct {
	// Bins is the number of bins in the block.
	Bins int `json:"bins"`
	// VR2 is the block's part of the squared Van Rossum distance:
	// (2/tau) times the sum of the squared filtered difference.
	VR2 float64 `json:"vr2"`
	// ZGR, ZGG and ZRR are the sums of products of the trains smoothed with
	// zeros beyond the ends (Schreiber similarity).
	ZGR float64 `json:"zgr"`
	ZGG float64 `json:"zgg"`
	ZRR float64 `json:"zrr"`
	// G, R, GR, GG and RR are the sums of the reflected smoothed trains,
	// each less its mean over the whole train, and of their products
	// (smoothed Pearson correlation).
	G  float64 `json:"g"`
	R  float64 `json:"r"`
	GR float64 `json:"gr"`
	GG float64 `json:"gg"`
	RR float64 `json:"rr"`
}

// Add adds x to b counted w times (a whole number).
func (b *TrainBlock) Add(x TrainBlock, w float64) {
	b.Bins += int(w) * x.Bins
	b.VR2 += w * x.VR2
	b.ZGR += w * x.ZGR
	b.ZGG += w * x.ZGG
	b.ZRR += w * x.ZRR
	b.G += w * x.G
	b.R += w * x.R
	b.GR += w * x.GR
	b.GG += w * x.GG
	b.RR += w * x.RR
}

// TrainBlocks returns the metrics' sums between generated train g and
// recorded train r (as Compare takes them) over consecutive blocks of
// blockBins bins (BlockCount). BlockScores over all blocks with weight 1
// gives Compare's scores up to rounding.
func (m *Metrics) TrainBlocks(g, r []float64, blockBins int) ([]TrainBlock, error) {
	if _, err := m.Compare(g, r); err != nil { // validates and sizes the scratch
		return nil, err
	}
	n := len(g)
	nb := BlockCount(n, blockBins)
	out := make([]TrainBlock, nb)
	sg, sr := m.sa[:n], m.sb[:n]
	decay := math.Exp(-1 / m.tau)
	var f float64
	for i := range g {
		f = f*decay + (g[i] - r[i])
		b := &out[blockOf(i, nb, blockBins)]
		b.Bins++
		b.VR2 += 2 / m.tau * f * f
	}
	SmoothZero(sg, g, m.kernel)
	SmoothZero(sr, r, m.kernel)
	for i := range n {
		b := &out[blockOf(i, nb, blockBins)]
		b.ZGR += sg[i] * sr[i]
		b.ZGG += sg[i] * sg[i]
		b.ZRR += sr[i] * sr[i]
	}
	SmoothReflect(sg, g, m.kernel)
	SmoothReflect(sr, r, m.kernel)
	mg, mr := mean(sg), mean(sr)
	for i := range n {
		b := &out[blockOf(i, nb, blockBins)]
		x, y := sg[i]-mg, sr[i]-mr
		b.G += x
		b.R += y
		b.GR += x * y
		b.GG += x * x
		b.RR += y * y
	}
	return out, nil
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// BlockScores recomputes the three metrics from blocks, block k counted
// w[k] times (whole numbers; nil: once each), as Compare defines them: a zero norm gives a
// Schreiber similarity of 0, a constant train a Pearson correlation of 0.
func BlockScores(blocks []TrainBlock, w []float64) Scores {
	var t TrainBlock
	for k, b := range blocks {
		wk := 1.0
		if w != nil {
			wk = w[k]
		}
		t.Add(b, wk)
	}
	n := float64(t.Bins)
	s := Scores{VanRossum: math.Sqrt(t.VR2)}
	if t.ZGG > 0 && t.ZRR > 0 {
		s.Schreiber = t.ZGR / math.Sqrt(t.ZGG*t.ZRR)
	}
	if n > 0 {
		vg, vr := t.GG-t.G*t.G/n, t.RR-t.R*t.R/n
		// A constant train's centred sums are 0 up to rounding.
		if vg > 1e-20*n && vr > 1e-20*n {
			s.Pearson = (t.GR - t.G*t.R/n) / math.Sqrt(vg*vr)
		}
	}
	return s
}

// NLLBlock is one block's part of a cell's NLL: the sum of the windows'
// NLLs and their number.
type NLLBlock struct {
	Sum     float64 `json:"sum"`
	Windows int     `json:"windows"`
}

// BlockNLL is the mean NLL over blocks, block k counted w[k] times (nil:
// once each); NaN when the counted blocks hold no window.
func BlockNLL(blocks []NLLBlock, w []float64) float64 {
	var s, n float64
	for k, b := range blocks {
		wk := 1.0
		if w != nil {
			wk = w[k]
		}
		s += wk * b.Sum
		n += wk * float64(b.Windows)
	}
	if n == 0 {
		return math.NaN()
	}
	return s / n
}

// BlockBootstrap is the 95% percentile interval of the IQM over cells of a
// per-cell value under a two-way bootstrap: each of resamples resamples
// draws nBlocks time blocks with replacement (weights w, the number of
// times each block is drawn) and, independently, nCells cells with
// replacement, and takes the IQM of value(cell, w) over the drawn cells
// (PCG seeded with seed). It errs wide: noise independent across cells and
// blocks enters its variance up to three times (McCullagh 2000,
// "Resampling and exchangeable arrays", Bernoulli 6:285). value must
// return a finite number for every cell and weights. It fails for no cells or blocks, fewer than
// DefaultResamples resamples, or a value that is not finite.
func BlockBootstrap(nCells, nBlocks int, value func(cell int, w []float64) float64, resamples int, seed uint64) (lo, hi float64, err error) {
	if nCells == 0 || nBlocks == 0 {
		return 0, 0, errors.New("block bootstrap: no cells or no blocks")
	}
	if resamples < DefaultResamples {
		return 0, 0, fmt.Errorf("block bootstrap: %d resamples, want at least %d", resamples, DefaultResamples)
	}
	rng := newRand(seed)
	w := make([]float64, nBlocks)
	vals := make([]float64, nCells)
	sample := make([]float64, nCells)
	iqms := make([]float64, resamples)
	for r := range iqms {
		clear(w)
		for range nBlocks {
			w[rng.IntN(nBlocks)]++
		}
		for c := range vals {
			v := value(c, w)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, 0, fmt.Errorf("block bootstrap: cell %d: value %v", c, v)
			}
			vals[c] = v
		}
		for i := range sample {
			sample[i] = vals[rng.IntN(nCells)]
		}
		iqms[r] = IQM(sample)
	}
	lo, hi = quantiles(iqms)
	return lo, hi, nil
}
