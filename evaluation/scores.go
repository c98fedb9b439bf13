package evaluation

import (
	"fmt"
	"math"

	"rgcpred/rollout"

	"gonum.org/v1/gonum/floats"
)

// MetricNames are the keys of the four metrics (docs/model.md
// section 5), in table order.
var MetricNames = []string{"nll", "van_rossum", "schreiber", "pearson"}

// RolloutMetricNames are the metrics of an autoregressive rollout alone
// (MetricNames without the NLL, which scores every window with the
// recorded history), as a replay through the daemon measures them.
var RolloutMetricNames = []string{"van_rossum", "schreiber", "pearson"}

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
	// windows (every Options.NLLStride-th end).
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
	// Blocks holds the scores in time blocks when they were kept
	// (Options.BlockBins); nil otherwise, and in averages over repeats.
	Blocks *CellBlocks `json:"blocks,omitempty"`
}

// Metric returns the score named by one of MetricNames; it panics on any
// other name, a programming error.
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
	panic("evaluation: unknown metric " + name)
}

// TrainScores scores one cell's generated train against its recorded one
// (count vectors over the same bins) with m: the three rollout metrics and
// the spike counts; NLL and Windows are left for the caller.
func TrainScores(m *rollout.Metrics, id int, generated, recorded []float64) (CellScores, error) {
	s, err := m.Compare(generated, recorded)
	if err != nil {
		return CellScores{}, fmt.Errorf("cell %d: %w", id, err)
	}
	return CellScores{ClusterID: id, VanRossum: s.VanRossum, Schreiber: s.Schreiber, Pearson: s.Pearson,
		RecordedSpikes: floats.Sum(recorded), GeneratedSpikes: floats.Sum(generated)}, nil
}

// Summarise returns, for each of MetricNames, the IQM of the cells' scores
// with its 95% percentile-bootstrap interval (rollout.Bootstrap).
func Summarise(cells []CellScores, resamples int, seed uint64) (map[string]rollout.Summary, error) {
	return SummariseMetrics(cells, MetricNames, resamples, seed)
}

// SummariseMetrics is Summarise over the named metrics only (e.g.
// RolloutMetricNames); every metric's bootstrap uses the same seed.
func SummariseMetrics(cells []CellScores, names []string, resamples int, seed uint64) (map[string]rollout.Summary, error) {
	out := make(map[string]rollout.Summary, len(names))
	vals := make([]float64, len(cells))
	for _, name := range names {
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

// AverageRepeats averages per-cell scores over repeats (same cells, same
// order); the window count is rounded to the nearest integer. One repeat is
// returned as it is.
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
