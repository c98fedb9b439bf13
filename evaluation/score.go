package evaluation

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"rgcpred/rgc"
	"rgcpred/rollout"
)

// Options configure the scoring of predictors on a split of a recording.
type Options struct {
	// Rec is the recording; Cells the cells to score (indices into
	// Rec.Cells).
	Rec   *rgc.Recording
	Cells []int
	// Split is the stretch of the recording scored.
	Split rgc.Split
	// Metrics computes the spike-train metrics.
	Metrics *rollout.Metrics
	// Batch is the largest number of windows per Predict call.
	Batch int
	// NLLStride scores the NLL on every NLLStride-th window end; 0 picks
	// AutoStride.
	NLLStride int
	// Stagger starts the rollouts at staggered phases
	// (rollout.Options.Stagger).
	Stagger bool
	// Policy turns the distributions into spikes in the rollouts (nil:
	// the median rule, the paper's).
	Policy rollout.Policy
	// MaxBins, if positive, limits the rollouts to that many bins after
	// the first window (rollout.Options.MaxBins); the NLL still covers the
	// split.
	MaxBins int
	// Resamples and Seed configure the bootstrap of the summaries.
	Resamples int
	Seed      uint64
	// BlockBins, if positive, keeps every cell's scores in time blocks of
	// that many bins (CellScores.Blocks) for the time-block x cell
	// bootstrap of the paired comparisons.
	BlockBins int
	// Progress receives progress lines (ProgressLine); nil for none.
	Progress io.Writer
	// Keep, if not nil, keeps some rollout trains of each model's first
	// repeat for a raster (ModelResult.Trains, Report.Raster).
	Keep *KeepTrains
}

// ModelResult is one evaluated model: its per-cell scores, averaged over
// its repeats, and their summaries over cells.
type ModelResult struct {
	// Name labels the model (ModelSpec.Name).
	Name string `json:"name"`
	// Kind is "checkpoint", "zero", "zero-pooled", "oracle", "glm" or "mix".
	Kind string `json:"kind"`
	// Checkpoints are the repeats of a checkpoint model; their per-cell
	// scores are averaged before summarising.
	Checkpoints []string `json:"checkpoints,omitempty"`
	// Members are a mixture's members, each "weight*spec" with its
	// normalised weight.
	Members []string `json:"members,omitempty"`
	// Policy is the model's spike policy when it differs from the
	// report's (the zero-input baseline under a threshold policy rolls out
	// by the median rule); "" otherwise.
	Policy string `json:"policy,omitempty"`
	// NLLStride is the window stride of the NLL.
	NLLStride int `json:"nll_stride"`
	// Summary maps each of MetricNames to the IQM over cells with its 95%
	// bootstrap interval.
	Summary map[string]rollout.Summary `json:"summary"`
	// Cells are the per-cell scores, averaged over the repeats.
	Cells []CellScores `json:"cells"`
	// Repeats holds each repeat's own per-cell scores when there are
	// several.
	Repeats [][]CellScores `json:"repeats,omitempty"`
	// Seconds is the time the evaluation took.
	Seconds float64 `json:"seconds"`
	// Trains are the rollout trains of the first repeat that Options.Keep
	// selects, one predicted train per cell; not written to JSON.
	Trains []CellTrains `json:"-"`
}

// EvaluateModel scores every repeat of a model, averages the per-cell
// scores over the repeats and summarises them over cells.
func EvaluateModel(ctx context.Context, sp ModelSpec, o Options) (*ModelResult, error) {
	start := time.Now()
	res := &ModelResult{Name: sp.Name, Kind: sp.Kind, Checkpoints: sp.Paths, Members: sp.Members}
	var repeats [][]CellScores
	for r, open := range sp.Open {
		p, closeFn, err := open()
		if err != nil {
			return nil, err
		}
		label := sp.Name
		if len(sp.Open) > 1 && r < len(sp.Paths) {
			label = fmt.Sprintf("%s [%s]", sp.Name, filepath.Base(sp.Paths[r]))
		}
		rows, stride, roll, err := scoreCells(ctx, p, label, o)
		closeFn()
		if err != nil {
			return nil, err
		}
		if r == 0 && o.Keep != nil {
			if res.Trains, err = o.Keep.keptTrains(roll); err != nil {
				return nil, err
			}
		}
		res.NLLStride = stride
		repeats = append(repeats, rows)
	}
	res.Cells = AverageRepeats(repeats)
	if len(repeats) > 1 {
		res.Repeats = repeats
	}
	var err error
	if res.Summary, err = Summarise(res.Cells, o.Resamples, o.Seed); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// AutoStride is the default NLL stride: every window for input-free
// predictors, else the smallest stride that keeps the windows at 60000,
// about as many as a rollout of the shipped recording's test split predicts,
// so a neural model's NLL costs no more than its rollout. Window ends taken
// at a fixed stride give an unbiased estimate of the mean over all windows.
func AutoStride(rec *rgc.Recording, split rgc.Split, ncells int, p rgc.Predictor) int {
	if f, ok := p.(rollout.InputFree); ok && f.InputFree() {
		return 1
	}
	_, _, n := rec.WindowRange(split)
	const maxWindows = 60000
	return max(1, (n*ncells+maxWindows-1)/maxWindows)
}

// ScoreCells scores one predictor: the NLL over the split's windows (every
// o.NLLStride-th end, or AutoStride's), then the autoregressive rollout and
// its spike-train metrics per cell. It returns the cells' scores in the
// order of o.Cells and the NLL stride used; label names the predictor in
// the progress lines.
func ScoreCells(ctx context.Context, p rgc.Predictor, label string, o Options) ([]CellScores, int, error) {
	rows, stride, _, err := scoreCells(ctx, p, label, o)
	return rows, stride, err
}

// scoreCells is ScoreCells that also returns the rollout.
func scoreCells(ctx context.Context, p rgc.Predictor, label string, o Options) ([]CellScores, int, *rollout.Result, error) {
	stride := o.NLLStride
	if stride == 0 {
		stride = AutoStride(o.Rec, o.Split, len(o.Cells), p)
	}
	pr := NewProgressLine(o.Progress, label+": nll")
	nll, nllBlocks, err := rollout.NLLBlocks(ctx, o.Rec, p, rollout.Options{Split: o.Split, Cells: o.Cells, MaxBatch: o.Batch, Progress: pr.Update}, stride, o.BlockBins)
	pr.Finish()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("nll: %w", err)
	}
	pr = NewProgressLine(o.Progress, label+": rollout")
	roll, err := rollout.Run(ctx, o.Rec, p, rollout.Options{Split: o.Split, Cells: o.Cells, MaxBatch: o.Batch, Progress: pr.Update,
		Stagger: o.Stagger, Policy: o.Policy, MaxBins: o.MaxBins})
	pr.Finish()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("rollout: %w", err)
	}
	rows := make([]CellScores, len(o.Cells))
	for i, tr := range roll.Trains {
		if rows[i], err = TrainScores(o.Metrics, tr.ClusterID, tr.Generated, tr.Recorded); err != nil {
			return nil, 0, nil, err
		}
		rows[i].NLL, rows[i].Windows = nll[i], tr.Windows
		if o.BlockBins > 0 {
			train, err := o.Metrics.TrainBlocks(tr.Generated, tr.Recorded, o.BlockBins)
			if err != nil {
				return nil, 0, nil, fmt.Errorf("cell %d: %w", tr.ClusterID, err)
			}
			rows[i].Blocks = &CellBlocks{NLL: nllBlocks[i], Train: train}
		}
	}
	return rows, stride, roll, nil
}
