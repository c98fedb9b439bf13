package synth

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"rgcpred/rgc"
)

// NLLResult summarises a predictor's negative log-likelihood over every
// window of a split.
type NLLResult struct {
	// Windows is the number of windows scored.
	Windows int
	// NLL is the mean negative log-likelihood (nats) of the true class.
	NLL float64
	// Entropy is the mean entropy (nats) of the predicted distributions:
	// for an exact predictor, the NLL it expects of itself.
	Entropy float64
	// PerCell holds each cell's mean NLL, in the order of the cells asked for.
	PerCell []float64
	// GapSE is the standard error of NLL - Entropy by batch means: the
	// windows of each cell cut into consecutive batches of SEBatch windows
	// (far longer than the 80-bin horizons that correlate neighbouring
	// windows), whose mean gaps are treated as independent. For an exact
	// predictor NLL - Entropy is 0 within a few GapSE. 0 when there are
	// fewer than two whole batches.
	GapSE float64
}

// SEBatch is the batch length, in windows, of NLLResult.GapSE.
const SEBatch = 2048

// minProb floors probabilities inside logarithms, so that a class the
// predictor deems impossible costs -log(minProb) rather than infinity.
const minProb = 1e-300

// BayesNLL scores the oracle on every window of split s of rec (the
// synthetic recording the oracle was built for) for the given cells
// (indices into rec.Cells): the Bayes-optimal NLL. The history is the
// recorded spike train. Cells are scored in parallel.
func BayesNLL(ctx context.Context, o *Oracle, rec *rgc.Recording, s rgc.Split, cells []int) (*NLLResult, error) {
	first, last, n := rec.WindowRange(s)
	res := &NLLResult{PerCell: make([]float64, len(cells))}
	if n == 0 {
		return nil, fmt.Errorf("bayes nll: split %s of %s has no whole windows", s, rec.Name)
	}
	idx := make([]int, len(cells))
	for j, c := range cells {
		if c < 0 || c >= len(rec.Cells) {
			return nil, fmt.Errorf("bayes nll: cell index %d out of range [0, %d)", c, len(rec.Cells))
		}
		i, ok := o.CellIndex(rec.Cells[c].ClusterID)
		if !ok {
			return nil, fmt.Errorf("bayes nll: the oracle does not know cluster %d", rec.Cells[c].ClusterID)
		}
		idx[j] = i
	}
	type part struct {
		nll, ent float64
		batches  []float64 // mean NLL - entropy of each whole batch
	}
	parts := make([]part, len(cells))
	errs := make([]error, len(cells))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(cells)); w++ {
		wg.Add(1)
		go func(o *Oracle) {
			defer wg.Done()
			for j := range jobs {
				if err := ctx.Err(); err != nil {
					errs[j] = err
					continue
				}
				sb := rec.Cells[cells[j]].SpikeBins
				lo := 0 // first spike the history filter can still reach
				hi := 0 // first spike after t
				nh := len(o.cells[idx[j]].hist)
				var p part
				bsum := 0.0
				for t := first; t <= last; t++ {
					for hi < len(sb) && int(sb[hi]) <= t {
						hi++
					}
					for lo < hi && int(sb[lo]) <= t-nh {
						lo++
					}
					if err := o.probsAt(idx[j], t, sb[lo:hi]); err != nil {
						errs[j] = fmt.Errorf("cluster %d, end bin %d: %w", rec.Cells[cells[j]].ClusterID, t, err)
						break
					}
					nl := -math.Log(max(o.probs[rgc.Target(sb, t)], minProb))
					h := entropy(o.probs)
					p.nll += nl
					p.ent += h
					bsum += nl - h
					if (t-first+1)%SEBatch == 0 {
						p.batches = append(p.batches, bsum/SEBatch)
						bsum = 0
					}
					if t%4096 == 0 && ctx.Err() != nil {
						break
					}
				}
				if errs[j] == nil && ctx.Err() != nil {
					errs[j] = ctx.Err()
				}
				parts[j] = p
			}
		}(o.Clone())
	}
	for j := range cells {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("bayes nll: %w", err)
		}
	}
	var batches []float64
	for j, p := range parts {
		batches = append(batches, p.batches...)
		res.NLL += p.nll
		res.Entropy += p.ent
		res.PerCell[j] = p.nll / float64(n)
	}
	res.Windows = n * len(cells)
	res.NLL /= float64(res.Windows)
	res.Entropy /= float64(res.Windows)
	if nb := len(batches); nb >= 2 {
		mean, ss := 0.0, 0.0
		for _, b := range batches {
			mean += b
		}
		mean /= float64(nb)
		for _, b := range batches {
			ss += (b - mean) * (b - mean)
		}
		res.GapSE = math.Sqrt(ss / float64(nb-1) / float64(nb))
	}
	return res, nil
}

// entropy returns -sum p log p in nats.
func entropy(p []float64) float64 {
	h := 0.0
	for _, v := range p {
		if v > 0 {
			h -= v * math.Log(v)
		}
	}
	return h
}

// ClassFrequencies returns the zero-input model of cells (indices into
// rec.Cells): the frequency of each class over every window of split s,
// pooled over the cells, with one pseudo-count per class (add-one
// smoothing) so that no class has probability 0.
func ClassFrequencies(rec *rgc.Recording, s rgc.Split, cells []int) []float64 {
	first, last, _ := rec.WindowRange(s)
	p := make([]float64, rgc.NumClasses)
	total := 0.0
	for k := range p {
		p[k] = 1
		total++
	}
	for _, c := range cells {
		sb := rec.Cells[c].SpikeBins
		for t := first; t <= last; t++ {
			p[rgc.Target(sb, t)]++
			total++
		}
	}
	for k := range p {
		p[k] /= total
	}
	return p
}

// FixedNLL scores a fixed distribution p (such as ClassFrequencies of the
// training split) on every window of split s of the given cells.
func FixedNLL(rec *rgc.Recording, s rgc.Split, cells []int, p []float64) *NLLResult {
	first, last, n := rec.WindowRange(s)
	res := &NLLResult{PerCell: make([]float64, len(cells)), Entropy: entropy(p)}
	for j, c := range cells {
		sb := rec.Cells[c].SpikeBins
		sum := 0.0
		for t := first; t <= last; t++ {
			sum -= math.Log(max(p[rgc.Target(sb, t)], minProb))
		}
		res.NLL += sum
		if n > 0 {
			res.PerCell[j] = sum / float64(n)
		}
	}
	res.Windows = n * len(cells)
	if res.Windows > 0 {
		res.NLL /= float64(res.Windows)
	}
	return res
}
