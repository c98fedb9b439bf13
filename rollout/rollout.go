package rollout

import (
	"context"
	"errors"
	"fmt"

	"rgcpred/rgc"
)

// Options configure a rollout or an NLL evaluation.
type Options struct {
	// Split is the stretch of the recording to run on.
	Split rgc.Split
	// Cells are the cells to run, as indices into the recording's Cells.
	Cells []int
	// Stagger starts the cells at staggered phases (StartOffset): cell i in
	// ascending cluster id order of Cells has its first window end at
	// first+StartOffset(i, len(Cells)) instead of first, as predictord does
	// by default. Rollout only; NLL ignores it.
	Stagger bool
	// MaxBatch is the largest number of windows per Predict call; 0 means
	// one call for all cells of a round (rollout) or 256 windows (NLL).
	MaxBatch int
	// Progress, if not nil, is called after every Predict call.
	Progress func(Progress)
	// Policy chooses each window's class from its distribution (nil:
	// Median, the paper's rule). Rollout only.
	Policy Policy
	// MaxBins, if positive, ends the rollout MaxBins bins after the split's
	// first window (a shorter stretch of a long split). Rollout only.
	MaxBins int
	// KeepChoices fills Train.Choices: every window's end and class, the
	// decisions a daemon takes on the same stretch. Rollout only.
	KeepChoices bool
}

// Choice is one window of a cell's rollout: the window ending at End and
// the class the policy chose for it (Step(End, Class) gives the next
// window and whether it placed a spike).
type Choice struct {
	End, Class int
}

// Progress reports how far a rollout or NLL evaluation has come.
type Progress struct {
	// Windows is the number of windows predicted so far.
	Windows int
	// Done and Total measure the work in bins (rollout: generated bins over
	// all cells) or windows (NLL).
	Done, Total int
}

// Train is the outcome of one cell's rollout: the generated and the recorded
// spike trains as count vectors over the same bins.
type Train struct {
	// ClusterID is the cell's cluster id.
	ClusterID int
	// Generated holds 1 where the rollout placed a spike, else 0.
	Generated []float64
	// Recorded holds the recorded spike count of each bin.
	Recorded []float64
	// Windows is the number of predictions the rollout made for the cell.
	Windows int
	// Start is the end bin of the cell's first window: Result.From-1, plus
	// StartOffset under Options.Stagger. Generated holds the recorded
	// spikes (1 per bin with any) on the bins From..Start, the cell's
	// history, and the rollout's own spikes after Start.
	Start int
	// Choices holds every window of the cell in order (Options.KeepChoices).
	Choices []Choice
}

// Result is the outcome of a rollout of several cells.
type Result struct {
	// From and To delimit the compared bins [From, To), the same for every
	// cell.
	From, To int
	// Trains holds one entry per cell, in the order of Options.Cells.
	Trains []Train
}

// Bins returns the bins a rollout of split s compares: the split is
// [from, to); the first window ends at first = from+1023 and holds the
// recorded spikes; the generated train covers [first+1, to). It fails when
// the split cannot hold a window and one bin after it.
func Bins(rec *rgc.Recording, s rgc.Split) (first, from, to int, err error) {
	lo, hi := rec.SplitRange(s)
	first = lo + rgc.WindowBins - 1
	if first+1 >= hi {
		return 0, 0, 0, fmt.Errorf("split %s of %s: %d bins, too short for a %d-bin window and a step", s, rec.Name, hi-lo, rgc.WindowBins)
	}
	return first, first + 1, hi, nil
}

// Run rolls the predictor out autoregressively (docs/model.md
// section 4) on every cell of opts.Cells over split opts.Split.
//
// Each cell starts with the window ending at the split's first bin where a
// whole window fits (first), or with Options.Stagger StartOffset bins later
// (Train.Start), holding the recorded spikes; after that its spike row
// comes only from its own generated train, its stimulus rows from the
// recording. A cell is active while its window end t is before the split's
// last bin (to-1), so the stimulus it reads always lies inside the split;
// each prediction's class (opts.Policy: by default the median, model.Median) moves t by Step. A step whose spike would
// fall past the split's last bin ends the cell without that spike. So every
// cell's generated train covers exactly the bins [first+1, to); under
// Stagger its bins first+1..Train.Start are the recorded spikes (its
// history, the spike row of its first window), so every cell is compared on
// the same bins and the unstaggered trains are unchanged.
//
// Batching: cells are independent, so each round predicts the next window of
// every active cell at once, each at its own end bin (Batch.Ends), in calls
// of at most opts.MaxBatch windows. The result does not depend on the
// batching (see TestBatchingEquivalence). Cancelling ctx stops the rollout
// between Predict calls with ctx's error.
func Run(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, opts Options) (*Result, error) {
	first, from, to, err := Bins(rec, opts.Split)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if opts.MaxBins > 0 {
		to = min(to, from+opts.MaxBins)
	}
	if len(opts.Cells) == 0 {
		return nil, errors.New("rollout: no cells")
	}
	policy := opts.Policy
	if policy == nil {
		policy = Median{}
	}
	for _, c := range opts.Cells {
		if c < 0 || c >= len(rec.Cells) {
			return nil, fmt.Errorf("rollout: cell index %d out of range (recording %s has %d cells)", c, rec.Name, len(rec.Cells))
		}
	}
	n := len(opts.Cells)
	maxBatch := opts.MaxBatch
	if maxBatch <= 0 || maxBatch > n {
		maxBatch = n
	}
	cells := make([]Cell, n)
	res := &Result{From: from, To: to, Trains: make([]Train, n)}
	offsets := make([]int, n)
	if opts.Stagger {
		ids := make([]int, n)
		for i, c := range opts.Cells {
			ids[i] = rec.Cells[c].ClusterID
		}
		if offsets, err = StartOffsetsByID(ids, nil, true); err != nil {
			return nil, fmt.Errorf("rollout: stagger: %w", err)
		}
	}
	last := to - 1
	total := 0
	active := make([]int, 0, n) // indices into cells still rolling
	for i, c := range opts.Cells {
		rc := &rec.Cells[c]
		start := first + offsets[i]
		cells[i].Reset(rc.ClusterID, start, rc.SpikeBins)
		tr := Train{
			ClusterID: rc.ClusterID,
			Generated: make([]float64, to-from),
			Recorded:  rc.Counts(from, to),
			Start:     start,
		}
		for b := range HistoryBins(rc.SpikeBins, from, min(start, last)) {
			tr.Generated[b-from] = 1
		}
		res.Trains[i] = tr
		if start < last {
			active = append(active, i)
			total += last - start
		}
	}
	b := &rgc.Batch{
		Inputs: make([]float32, maxBatch*rgc.WindowLen),
		Cells:  make([]int, maxBatch),
		Ends:   make([]int, maxBatch),
	}
	out := make([]float32, maxBatch*rgc.NumClasses)
	batchIdx := make([]int, 0, maxBatch) // indices into cells of the batch
	done, windows := 0, 0
	for len(active) > 0 {
		for start := 0; start < len(active); start += maxBatch {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("rollout: %w", err)
			}
			batchIdx = batchIdx[:0]
			for _, i := range active[start:min(start+maxBatch, len(active))] {
				batchIdx = append(batchIdx, i)
			}
			m := len(batchIdx)
			b.Inputs, b.Cells, b.Ends = b.Inputs[:m*rgc.WindowLen], b.Cells[:m], b.Ends[:m]
			for j, i := range batchIdx {
				win := b.Inputs[j*rgc.WindowLen : (j+1)*rgc.WindowLen]
				rec.StimulusWindow(cells[i].Next, win)
				cells[i].History.FillRow(win[rgc.SpikeRow*rgc.WindowBins:])
				b.Cells[j] = cells[i].ID
				b.Ends[j] = cells[i].Next
			}
			if err := p.Predict(b, out[:m*rgc.NumClasses]); err != nil {
				return nil, fmt.Errorf("rollout: predict %d windows: %w", m, err)
			}
			windows += m
			for j, i := range batchIdx {
				c := &cells[i]
				prev := c.Next
				k := policy.Choose(c.ID, c.Next, out[j*rgc.NumClasses:(j+1)*rgc.NumClasses])
				if opts.KeepChoices {
					res.Trains[i].Choices = append(res.Trains[i].Choices, Choice{End: prev, Class: k})
				}
				bin, spike := c.Advance(k)
				if spike && bin <= last {
					res.Trains[i].Generated[bin-from] = 1
				}
				res.Trains[i].Windows++
				done += min(bin, last) - prev
			}
			if opts.Progress != nil {
				opts.Progress(Progress{Windows: windows, Done: done, Total: total})
			}
		}
		// Drop the cells whose window reached the last bin.
		k := 0
		for _, i := range active {
			if cells[i].Next < last {
				active[k] = i
				k++
			}
		}
		active = active[:k]
	}
	return res, nil
}
