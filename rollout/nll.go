package rollout

import (
	"context"
	"errors"
	"fmt"

	"rgcpred/model"
	"rgcpred/rgc"
)

// InputFree is implemented by predictors whose output depends only on a
// batch's Cells and Ends, never on its Inputs (such as the zero-input
// baseline). The NLL evaluation then leaves Inputs unfilled, which makes
// scoring every window of a split cheap.
type InputFree interface {
	// InputFree reports whether the predictor ignores Inputs.
	InputFree() bool
}

// NLL returns each cell's mean negative log-likelihood of the true class
// (docs/model.md section 5) over the windows of split opts.Split
// that rgc.Recording.WindowRange lists (window and target both inside the
// split), taking every stride-th window end (stride 1: every window), each
// scored by model.NLL (probabilities floored at model.ProbFloor). The
// windows hold the recorded spikes (teacher forcing). Windows are predicted
// in batches of opts.MaxBatch (default 256) spanning cells; the result is in
// the order of opts.Cells.
func NLL(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, opts Options, stride int) ([]float64, error) {
	means, _, err := NLLBlocks(ctx, rec, p, opts, stride, 0)
	return means, err
}

// NLLBlocks is NLL that also splits each cell's NLL into time blocks: the
// sums of the NLLs of the window ends in consecutive blocks of blockBins
// bins from the split's first window end (BlockCount; blockBins 0: one
// block). The means do not depend on the blocks.
func NLLBlocks(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, opts Options, stride, blockBins int) (means []float64, blocks [][]NLLBlock, err error) {
	if len(opts.Cells) == 0 {
		return nil, nil, errors.New("nll: no cells")
	}
	if stride < 1 {
		return nil, nil, fmt.Errorf("nll: stride %d, want at least 1", stride)
	}
	for _, c := range opts.Cells {
		if c < 0 || c >= len(rec.Cells) {
			return nil, nil, fmt.Errorf("nll: cell index %d out of range (recording %s has %d cells)", c, rec.Name, len(rec.Cells))
		}
	}
	first, last, nw := rec.WindowRange(opts.Split)
	if nw == 0 {
		return nil, nil, fmt.Errorf("nll: split %s of %s holds no window", opts.Split, rec.Name)
	}
	maxBatch := opts.MaxBatch
	if maxBatch <= 0 {
		maxBatch = 256
	}
	fill := true
	if f, ok := p.(InputFree); ok && f.InputFree() {
		fill = false
	}
	b := &rgc.Batch{
		Inputs: make([]float32, maxBatch*rgc.WindowLen),
		Cells:  make([]int, maxBatch),
		Ends:   make([]int, maxBatch),
	}
	out := make([]float32, maxBatch*rgc.NumClasses)
	owner := make([]int, maxBatch)   // position in opts.Cells of each window
	targets := make([]int, maxBatch) // true class of each window
	nb := BlockCount(last-first+1, blockBins)
	sum := make([]float64, len(opts.Cells))
	count := make([]int, len(opts.Cells))
	blocks = make([][]NLLBlock, len(opts.Cells))
	for i := range blocks {
		blocks[i] = make([]NLLBlock, nb)
	}
	total := ((nw-1)/stride + 1) * len(opts.Cells)
	done := 0
	m := 0
	flush := func() error {
		if m == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("nll: %w", err)
		}
		b.Inputs, b.Cells, b.Ends = b.Inputs[:m*rgc.WindowLen], b.Cells[:m], b.Ends[:m]
		if err := p.Predict(b, out[:m*rgc.NumClasses]); err != nil {
			return fmt.Errorf("nll: predict %d windows: %w", m, err)
		}
		for j := 0; j < m; j++ {
			v := model.NLL(out[j*rgc.NumClasses:(j+1)*rgc.NumClasses], targets[j])
			sum[owner[j]] += v
			count[owner[j]]++
			blk := &blocks[owner[j]][blockOf(b.Ends[j]-first, nb, blockBins)]
			blk.Sum += v
			blk.Windows++
		}
		done += m
		m = 0
		if opts.Progress != nil {
			opts.Progress(Progress{Windows: done, Done: done, Total: total})
		}
		return nil
	}
	b.Inputs, b.Cells, b.Ends = b.Inputs[:cap(b.Inputs)], b.Cells[:cap(b.Cells)], b.Ends[:cap(b.Ends)]
	for t := first; t <= last; t += stride {
		for pos, c := range opts.Cells {
			sb := rec.Cells[c].SpikeBins
			if fill {
				win := b.Inputs[m*rgc.WindowLen : (m+1)*rgc.WindowLen]
				rec.StimulusWindow(t, win)
				rgc.FillSpikeRow(win, sb, t)
			}
			targets[m] = rgc.Target(sb, t)
			b.Cells[m] = rec.Cells[c].ClusterID
			b.Ends[m] = t
			owner[m] = pos
			m++
			if m == maxBatch {
				if err := flush(); err != nil {
					return nil, nil, err
				}
				b.Inputs, b.Cells, b.Ends = b.Inputs[:cap(b.Inputs)], b.Cells[:cap(b.Cells)], b.Ends[:cap(b.Ends)]
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	means = make([]float64, len(opts.Cells))
	for i := range means {
		means[i] = sum[i] / float64(count[i])
	}
	return means, blocks, nil
}
