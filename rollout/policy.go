package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"rgcpred/model"
	"rgcpred/rgc"
)

// Policy turns the model's 81-class distribution for a cell's window into
// the class the cell steps by (Step): a spike at end+k+1 for k <
// rgc.Horizon, silence through end+rgc.Horizon for rgc.NoSpikeClass.
//
// Choose must be a pure function of its arguments, so that the daemon and
// the offline rollout, which batch and order windows differently, take the
// same decisions.
type Policy interface {
	// Choose returns the class for the window of cell (cluster id) ending
	// at bin end, given the window's class probabilities.
	Choose(cell, end int, probs []float32) int
	// String names the policy as ParsePolicy reads it.
	String() string
}

// Median is the paper's policy (spec section 4) and the default: the first
// class whose cumulative probability reaches 0.5 (model.Median).
type Median struct{}

// Choose implements Policy.
func (Median) Choose(_, _ int, probs []float32) int { return model.Median(probs) }

// String returns the policy's name for flags and reports.
func (Median) String() string { return "median" }

// Sample draws the class from the distribution. The draw for a window is a
// hash of (Seed, cell, end), not a generator's state, so it does not depend
// on the order in which windows are predicted: repeated runs, the daemon
// and the offline rollout draw the same class for the same window. Over
// windows the classes follow the model's distribution, so a cell fires at
// the rate the model predicts rather than only when a spike is more likely
// than not.
type Sample struct {
	// Seed selects the sequence of draws.
	Seed uint64
}

// Choose implements Policy.
func (s Sample) Choose(cell, end int, probs []float32) int {
	u := uniform(s.Seed, uint64(cell), uint64(end))
	var c float64
	for k, p := range probs {
		c += float64(p)
		if c > u {
			return k
		}
	}
	return len(probs) - 1
}

// String returns "sample:SEED", as the --policy flag reads it.
func (s Sample) String() string { return "sample:" + strconv.FormatUint(s.Seed, 10) }

// uniform returns a number in [0, 1) from the three keys (splitmix64
// finaliser over their combination).
func uniform(a, b, c uint64) float64 {
	x := a*0x9e3779b97f4a7c15 ^ b*0xbf58476d1ce4e5b9 ^ c*0x94d049bb133111eb
	for range 2 {
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
	}
	return float64(x>>11) / (1 << 53)
}

// Threshold fires when the probability of a spike within the prediction
// period, 1 - P(no spike), reaches the cell's threshold, at the median of
// the spike time given a spike in the period; otherwise the cell stays
// silent for the period. FitThresholds chooses each cell's threshold on
// the training split so that the generated rate matches the recorded one.
type Threshold struct {
	// Thresholds maps cluster ids to thresholds in (0, 1].
	Thresholds map[int]float64
	// Source names where the thresholds came from (a file), for String.
	Source string
}

// Choose implements Policy. A cell without a threshold uses the median
// rule's implicit one, 0.5.
func (t *Threshold) Choose(cell, _ int, probs []float32) int {
	theta, ok := t.Thresholds[cell]
	if !ok {
		theta = 0.5
	}
	pSpike := 1 - float64(probs[rgc.NoSpikeClass])
	if pSpike < theta || pSpike <= 0 {
		return rgc.NoSpikeClass
	}
	var c float64
	for k, p := range probs[:rgc.NoSpikeClass] {
		c += float64(p)
		if c >= pSpike/2 {
			return k
		}
	}
	return rgc.NoSpikeClass - 1
}

// String returns "threshold:SOURCE", naming where the thresholds came from.
func (t *Threshold) String() string { return "threshold:" + t.Source }

// Check reports an error unless every cell of ids has a threshold in
// (0, 1].
func (t *Threshold) Check(ids []int) error {
	for _, id := range ids {
		theta, ok := t.Thresholds[id]
		if !ok {
			return fmt.Errorf("rollout: threshold policy %s has no threshold for cell %d", t.Source, id)
		}
		if !(theta > 0 && theta <= 1) {
			return fmt.Errorf("rollout: threshold policy %s: cell %d threshold %v outside (0, 1]", t.Source, id, theta)
		}
	}
	return nil
}

// ThresholdFile is the JSON form of a fitted threshold policy.
type ThresholdFile struct {
	// Checkpoint is the model the thresholds were fitted for.
	Checkpoint string `json:"checkpoint"`
	// Recording and Split name the data they were fitted on.
	Recording string `json:"recording"`
	Split     string `json:"split"`
	// Bins is the length of the fitted stretch.
	Bins int `json:"bins"`
	// Cells holds one entry per cell.
	Cells []ThresholdCell `json:"cells"`
}

// ThresholdCell is one cell's fitted threshold.
type ThresholdCell struct {
	// ID is the cluster id.
	ID int `json:"id"`
	// Threshold is the fitted threshold on P(spike within the period).
	Threshold float64 `json:"threshold"`
	// Recorded and Generated are the spike counts of the recording and of
	// the rollout with the threshold over the fitted stretch.
	Recorded  int `json:"recorded"`
	Generated int `json:"generated"`
}

// maxThresholdFile bounds the size of a threshold file read from disk.
const maxThresholdFile = 16 << 20

// LoadThreshold reads a threshold policy written by FitThresholds' caller.
func LoadThreshold(path string) (*Threshold, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rollout: threshold policy: %w", err)
	}
	if st.Size() > maxThresholdFile {
		return nil, fmt.Errorf("rollout: threshold policy %s: %d bytes exceeds %d", path, st.Size(), maxThresholdFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rollout: threshold policy: %w", err)
	}
	var f ThresholdFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("rollout: threshold policy %s: %w", path, err)
	}
	if len(f.Cells) == 0 {
		return nil, fmt.Errorf("rollout: threshold policy %s: no cells", path)
	}
	t := &Threshold{Thresholds: make(map[int]float64, len(f.Cells)), Source: path}
	for _, c := range f.Cells {
		if _, dup := t.Thresholds[c.ID]; dup {
			return nil, fmt.Errorf("rollout: threshold policy %s: cell %d listed twice", path, c.ID)
		}
		if !(c.Threshold > 0 && c.Threshold <= 1) {
			return nil, fmt.Errorf("rollout: threshold policy %s: cell %d threshold %v outside (0, 1]", path, c.ID, c.Threshold)
		}
		t.Thresholds[c.ID] = c.Threshold
	}
	return t, nil
}

// ParsePolicy reads a policy named on a command line: "median" (the
// default, also for ""), "sample" or "sample:SEED", or "threshold:FILE"
// (a file of fitted thresholds, ThresholdFile).
func ParsePolicy(spec string) (Policy, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	switch name {
	case "", "median":
		if hasArg {
			return nil, fmt.Errorf("policy %q: median takes no argument", spec)
		}
		return Median{}, nil
	case "sample":
		if !hasArg {
			return Sample{Seed: 1}, nil
		}
		seed, err := strconv.ParseUint(arg, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("policy %q: seed: %w", spec, err)
		}
		return Sample{Seed: seed}, nil
	case "threshold":
		if arg == "" {
			return nil, errors.New("policy threshold needs a file: threshold:FILE (trainer fit-threshold writes it)")
		}
		return LoadThreshold(arg)
	}
	return nil, fmt.Errorf("unknown policy %q (median, sample[:SEED], threshold:FILE)", spec)
}

// CheckPolicy reports an error if p cannot serve every cell of ids.
func CheckPolicy(p Policy, ids []int) error {
	if t, ok := p.(*Threshold); ok {
		return t.Check(ids)
	}
	return nil
}

// logit and its inverse map thresholds to an unbounded scale for bisection.
func logit(p float64) float64 { return math.Log(p / (1 - p)) }
func expit(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// FitOptions configure FitThresholds.
type FitOptions struct {
	// Options selects the cells, split (normally rgc.Train), stretch
	// (MaxBins) and batching of the rollouts; its Policy is ignored.
	Options
	// Iterations is the number of bisection steps (default 10: each
	// halves every cell's bracket of logit(threshold), which spans
	// [-9.2, 9.2], 1e-4 to 0.9999).
	Iterations int
}

// FitThresholds chooses, for every cell of opts.Cells, the threshold at
// which the autoregressive rollout over opts' stretch generates as many
// spikes as were recorded there (after each cell's first window). Every
// iteration is one rollout of all cells, each with its own threshold
// bisected on the logit scale (a higher threshold fires less often); since
// an autoregressive rollout's count is a noisy function of the threshold,
// each cell gets the tested threshold whose count came closest to the
// recorded one. It returns one entry per cell, in the order of opts.Cells.
func FitThresholds(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, opts FitOptions) ([]ThresholdCell, error) {
	iters := opts.Iterations
	if iters <= 0 {
		iters = 10
	}
	n := len(opts.Cells)
	lo, hi := make([]float64, n), make([]float64, n)
	best := make([]ThresholdCell, n)
	th := &Threshold{Thresholds: make(map[int]float64, n), Source: "fit"}
	for i := range n {
		lo[i], hi[i] = logit(1e-4), logit(1-1e-4)
	}
	ro := opts.Options
	ro.Policy = th
	for it := range iters {
		for i, c := range opts.Cells {
			th.Thresholds[rec.Cells[c].ClusterID] = expit((lo[i] + hi[i]) / 2)
		}
		res, err := Run(ctx, rec, p, ro)
		if err != nil {
			return nil, fmt.Errorf("rollout: fit thresholds, iteration %d: %w", it, err)
		}
		for i, tr := range res.Trains {
			var gen, recd int
			for j := range tr.Generated {
				if res.From+j > tr.Start {
					gen += int(tr.Generated[j])
					recd += int(min(tr.Recorded[j], 1))
				}
			}
			id := tr.ClusterID
			cur := ThresholdCell{ID: id, Threshold: th.Thresholds[id], Recorded: recd, Generated: gen}
			if it == 0 || abs(gen-recd) < abs(best[i].Generated-recd) {
				best[i] = cur
			}
			if x := logit(cur.Threshold); gen > recd {
				lo[i] = x // fires too often: raise the threshold
			} else {
				hi[i] = x
			}
		}
	}
	return best, nil
}

func abs(x int) int { return max(x, -x) }
