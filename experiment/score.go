package experiment

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rgc/synth"
	"rgcpred/rollout"
)

// MetricNames are the keys of the four metrics (docs/spike-prediction.md
// section 5), in table order.
var MetricNames = []string{"nll", "van_rossum", "schreiber", "pearson"}

// MetricTitles label the metrics in tables and figures.
var MetricTitles = map[string]string{
	"nll":        "NLL (lower is better)",
	"van_rossum": "Van Rossum distance (lower is better)",
	"schreiber":  "Schreiber similarity (higher is better)",
	"pearson":    "Smoothed Pearson correlation (higher is better)",
}

// LowerIsBetter reports whether smaller values of the named metric are
// better (NLL, Van Rossum distance).
func LowerIsBetter(metric string) bool { return metric == "nll" || metric == "van_rossum" }

// CellScores are one cell's scores on a split: the NLL over the split's
// windows and the spike-train metrics of its autoregressive rollout.
type CellScores struct {
	// ClusterID is the cell's cluster id.
	ClusterID int `json:"cluster_id"`
	// NLL is the mean negative log-likelihood (nats) over the split's
	// windows (every EvalOptions.NLLStride-th end).
	NLL float64 `json:"nll"`
	// VanRossum, Schreiber and Pearson compare the rollout's train with
	// the recorded one.
	VanRossum float64 `json:"van_rossum"`
	Schreiber float64 `json:"schreiber"`
	Pearson   float64 `json:"pearson"`
	// RecordedSpikes and GeneratedSpikes count the two trains' spikes over
	// the compared bins; Windows is the number of predictions the rollout
	// made.
	RecordedSpikes  float64 `json:"recorded_spikes"`
	GeneratedSpikes float64 `json:"generated_spikes"`
	Windows         int     `json:"rollout_windows"`
}

// Metric returns the score named by one of MetricNames.
func (c *CellScores) Metric(name string) float64 {
	switch name {
	case "nll":
		return c.NLL
	case "van_rossum":
		return c.VanRossum
	case "schreiber":
		return c.Schreiber
	case "pearson":
		return c.Pearson
	}
	panic("unknown metric " + name)
}

// EvalOptions configure the scoring of predictors on a split of a
// recording.
type EvalOptions struct {
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
	// Progress receives progress lines (ProgressLine); nil for none.
	Progress io.Writer
}

// ModelSpec is a model to evaluate: a name, a kind, and a constructor per
// repeat (e.g. checkpoints trained with different seeds).
type ModelSpec struct {
	// Name labels the model; Kind is "checkpoint", "zero" (per-cell
	// zero-input baseline), "zero-pooled", "oracle" or "glm".
	Name, Kind string
	// Paths are the checkpoint files of a checkpoint model, one per repeat.
	Paths []string
	// Open builds each repeat's predictor and the function that releases
	// it.
	Open []func() (rgc.Predictor, func(), error)
}

// ModelResult is one evaluated model: its per-cell scores, averaged over
// its repeats, and their summaries over cells.
type ModelResult struct {
	// Name labels the model (ModelSpec.Name).
	Name string `json:"name"`
	// Kind is "checkpoint", "zero", "zero-pooled", "oracle" or "glm".
	Kind string `json:"kind"`
	// Checkpoints are the repeats of a checkpoint model; their per-cell
	// scores are averaged before summarising.
	Checkpoints []string `json:"checkpoints,omitempty"`
	// NLLStride is the window stride of the NLL.
	NLLStride int `json:"nll_stride"`
	// Summary maps each of MetricNames to the IQM over cells with its 95%
	// bootstrap interval.
	Summary map[string]rollout.Summary `json:"summary"`
	Cells   []CellScores               `json:"cells"`
	// Repeats holds each repeat's own per-cell scores when there are
	// several.
	Repeats [][]CellScores `json:"repeats,omitempty"`
	// Seconds is the time the evaluation took.
	Seconds float64 `json:"seconds"`
}

// ZeroSpec is the zero-input baseline fitted on the training split of the
// cells: per cell, or pooled over them.
func ZeroSpec(rec *rgc.Recording, cells []int, pooled bool) ModelSpec {
	kind := "zero"
	if pooled {
		kind = "zero-pooled"
	}
	return ModelSpec{Name: kind, Kind: kind, Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			z, err := rollout.NewZeroInput(rec, cells, pooled)
			return z, func() {}, err
		}}}
}

// OracleSpec is the exact oracle of the synthetic recording in dir.
func OracleSpec(dir string) ModelSpec {
	return ModelSpec{Name: "oracle", Kind: "oracle", Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			o, err := synth.OracleFromDir(dir)
			return o, func() {}, err
		}}}
}

// GLMSpec is the GLM baseline fitted by `trainer glm` (its JSON file at
// path), evaluated exactly on rec.
func GLMSpec(rec *rgc.Recording, path string) ModelSpec {
	return ModelSpec{Name: "glm", Kind: "glm", Open: []func() (rgc.Predictor, func(), error){
		func() (rgc.Predictor, func(), error) {
			tr, err := glm.LoadTruth(path)
			if err != nil {
				return nil, nil, err
			}
			p, err := glm.NewPredictor(rec, tr)
			if err != nil {
				return nil, nil, fmt.Errorf("glm %s: %w", path, err)
			}
			return p, func() {}, nil
		}}}
}

// CheckpointSpec is a checkpoint model with one file per repeat, run by the
// inference engine on the cells with cluster ids ids, named after its
// first file.
func CheckpointSpec(paths []string, ids []int, batch, threads int) ModelSpec {
	sp := ModelSpec{Name: checkpointName(paths), Kind: "checkpoint", Paths: paths}
	for _, p := range paths {
		sp.Open = append(sp.Open, func() (rgc.Predictor, func(), error) {
			return OpenCheckpoint(p, ids, batch, threads)
		})
	}
	return sp
}

// checkpointName names a checkpoint model after its first file, with the
// number of repeats.
func checkpointName(paths []string) string {
	n := strings.TrimSuffix(filepath.Base(paths[0]), filepath.Ext(paths[0]))
	if len(paths) > 1 {
		n += fmt.Sprintf(" (x%d)", len(paths))
	}
	return n
}

// OpenCheckpoint loads a checkpoint into an inference engine of batch
// windows and threads threads (0: all cores), after checking that it knows
// every cell to evaluate (cluster ids ids). The returned function releases
// the engine.
func OpenCheckpoint(path string, ids []int, batch, threads int) (rgc.Predictor, func(), error) {
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	known := make(map[int]bool, len(ck.CellIDs))
	for _, id := range ck.CellIDs {
		known[id] = true
	}
	var missing []int
	for _, id := range ids {
		if !known[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("checkpoint %s does not know cells %v (it has %d cells; try --cells quality)", path, missing, len(ck.CellIDs))
	}
	if threads < 1 {
		threads = runtime.NumCPU()
	}
	e, err := engine.New(ck, batch, threads)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return e, func() { e.Close() }, nil
}

// EvaluateModel scores every repeat of a model, averages the per-cell
// scores over the repeats and summarises them over cells.
func EvaluateModel(ctx context.Context, sp ModelSpec, o EvalOptions) (*ModelResult, error) {
	start := time.Now()
	res := &ModelResult{Name: sp.Name, Kind: sp.Kind, Checkpoints: sp.Paths}
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
		rows, stride, err := ScoreCells(ctx, p, label, o)
		closeFn()
		if err != nil {
			return nil, err
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

// Summarise returns, for each of MetricNames, the IQM of the cells' scores
// with its 95% percentile-bootstrap interval (rollout.Bootstrap).
func Summarise(cells []CellScores, resamples int, seed uint64) (map[string]rollout.Summary, error) {
	out := make(map[string]rollout.Summary, len(MetricNames))
	vals := make([]float64, len(cells))
	for _, name := range MetricNames {
		for i := range cells {
			vals[i] = cells[i].Metric(name)
		}
		s, err := rollout.Bootstrap(vals, resamples, seed)
		if err != nil {
			return nil, fmt.Errorf("summarise %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
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

// AverageRepeats averages per-cell scores over repeats (same cells, same
// order); the window count is rounded to the nearest integer.
func AverageRepeats(reps [][]CellScores) []CellScores {
	if len(reps) == 1 {
		return reps[0]
	}
	out := make([]CellScores, len(reps[0]))
	n := float64(len(reps))
	for i := range out {
		out[i].ClusterID = reps[0][i].ClusterID
		out[i].RecordedSpikes = reps[0][i].RecordedSpikes
		var w float64
		for _, r := range reps {
			out[i].NLL += r[i].NLL / n
			out[i].VanRossum += r[i].VanRossum / n
			out[i].Schreiber += r[i].Schreiber / n
			out[i].Pearson += r[i].Pearson / n
			out[i].GeneratedSpikes += r[i].GeneratedSpikes / n
			w += float64(r[i].Windows)
		}
		out[i].Windows = int(math.Round(w / n))
	}
	return out
}

// ScoreCells scores one predictor: the NLL over the split's windows (every
// o.NLLStride-th end, or AutoStride's), then the autoregressive rollout and
// its spike-train metrics per cell. It returns the cells' scores in the
// order of o.Cells and the NLL stride used; label names the predictor in
// the progress lines.
func ScoreCells(ctx context.Context, p rgc.Predictor, label string, o EvalOptions) ([]CellScores, int, error) {
	stride := o.NLLStride
	if stride == 0 {
		stride = AutoStride(o.Rec, o.Split, len(o.Cells), p)
	}
	pr := NewProgressLine(o.Progress, label+": nll")
	nll, err := rollout.NLL(ctx, o.Rec, p, rollout.Options{Split: o.Split, Cells: o.Cells, MaxBatch: o.Batch, Progress: pr.Update}, stride)
	pr.Finish()
	if err != nil {
		return nil, 0, fmt.Errorf("nll: %w", err)
	}
	pr = NewProgressLine(o.Progress, label+": rollout")
	roll, err := rollout.Run(ctx, o.Rec, p, rollout.Options{Split: o.Split, Cells: o.Cells, MaxBatch: o.Batch, Progress: pr.Update,
		Stagger: o.Stagger, Policy: o.Policy, MaxBins: o.MaxBins})
	pr.Finish()
	if err != nil {
		return nil, 0, fmt.Errorf("rollout: %w", err)
	}
	rows := make([]CellScores, len(o.Cells))
	for i, tr := range roll.Trains {
		s, err := o.Metrics.Compare(tr.Generated, tr.Recorded)
		if err != nil {
			return nil, 0, fmt.Errorf("cell %d: %w", tr.ClusterID, err)
		}
		rows[i] = CellScores{
			ClusterID: tr.ClusterID, NLL: nll[i],
			VanRossum: s.VanRossum, Schreiber: s.Schreiber, Pearson: s.Pearson,
			RecordedSpikes: sum(tr.Recorded), GeneratedSpikes: sum(tr.Generated), Windows: tr.Windows,
		}
	}
	return rows, stride, nil
}

func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}
