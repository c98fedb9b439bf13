package rollout

import (
	"errors"
	"fmt"

	"rgcpred/rgc"
)

// ZeroInput is the zero-input baseline of Doran et al. (ICML 2024): a
// predictor that ignores its input window and always outputs the empirical
// distribution of the training split's target classes, either per cell or
// pooled over cells. Counts get add-one (Laplace) smoothing,
// p_k = (n_k + 1) / (N + rgc.NumClasses), so no class has probability 0.
type ZeroInput struct {
	dist   map[int][]float32 // cluster id -> class probabilities
	pooled bool
}

// NewZeroInput fits the baseline on the training-split windows
// (rgc.Recording.WindowRange(rgc.Train)) of the cells cellIdx (indices into
// rec.Cells). With pooled, every cell gets the distribution of all their
// windows together; otherwise each cell gets its own.
func NewZeroInput(rec *rgc.Recording, cellIdx []int, pooled bool) (*ZeroInput, error) {
	if len(cellIdx) == 0 {
		return nil, errors.New("zero-input baseline: no cells")
	}
	first, last, n := rec.WindowRange(rgc.Train)
	if n == 0 {
		return nil, fmt.Errorf("zero-input baseline: training split of %s holds no window", rec.Name)
	}
	counts := make([][rgc.NumClasses]int, len(cellIdx))
	for i, c := range cellIdx {
		if c < 0 || c >= len(rec.Cells) {
			return nil, fmt.Errorf("zero-input baseline: cell index %d out of range (recording %s has %d cells)", c, rec.Name, len(rec.Cells))
		}
		sb := rec.Cells[c].SpikeBins
		j := 0 // index of the first spike after t
		for t := first; t <= last; t++ {
			for j < len(sb) && int(sb[j]) <= t {
				j++
			}
			k := rgc.NoSpikeClass
			if j < len(sb) && int(sb[j])-t-1 < rgc.Horizon {
				k = int(sb[j]) - t - 1
			}
			counts[i][k]++
		}
	}
	z := &ZeroInput{dist: make(map[int][]float32, len(cellIdx)), pooled: pooled}
	norm := func(cnt [rgc.NumClasses]int, windows int) []float32 {
		p := make([]float32, rgc.NumClasses)
		for k, v := range cnt {
			p[k] = float32(float64(v+1) / float64(windows+rgc.NumClasses))
		}
		return p
	}
	if pooled {
		var all [rgc.NumClasses]int
		for i := range counts {
			for k, v := range counts[i] {
				all[k] += v
			}
		}
		p := norm(all, n*len(cellIdx))
		for _, c := range cellIdx {
			z.dist[rec.Cells[c].ClusterID] = p
		}
		return z, nil
	}
	for i, c := range cellIdx {
		z.dist[rec.Cells[c].ClusterID] = norm(counts[i], n)
	}
	return z, nil
}

// Distribution returns the class probabilities the baseline predicts for the
// cell with cluster id id, and whether it knows the cell.
func (z *ZeroInput) Distribution(id int) ([]float32, bool) {
	p, ok := z.dist[id]
	return p, ok
}

// Pooled reports whether one distribution serves every cell.
func (z *ZeroInput) Pooled() bool { return z.pooled }

// InputFree reports true: the baseline never reads the window (see
// InputFree).
func (z *ZeroInput) InputFree() bool { return true }

// Predict writes each window's cell distribution to out. An unknown cell is
// an error.
func (z *ZeroInput) Predict(b *rgc.Batch, out []float32) error {
	if len(out) < b.Len()*rgc.NumClasses {
		return fmt.Errorf("zero-input baseline: out has %d floats for %d windows", len(out), b.Len())
	}
	for i, id := range b.Cells {
		p, ok := z.dist[id]
		if !ok {
			return fmt.Errorf("zero-input baseline: unknown cell %d", id)
		}
		copy(out[i*rgc.NumClasses:(i+1)*rgc.NumClasses], p)
	}
	return nil
}
