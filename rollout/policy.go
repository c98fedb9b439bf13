package rollout

import (
	"errors"
	"fmt"
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
// silent for the period. FitThresholds chooses each cell's threshold on a
// split other than the scored one (validation) so that the generated rate
// matches the recorded one.
type Threshold struct {
	// Thresholds maps cluster ids to thresholds in (0, 1].
	Thresholds map[int]float64
	// Source names where the thresholds came from (a file), for String.
	Source string
	// Split names the split the thresholds were fitted on ("" if not
	// known), which must not be the split they are scored on.
	Split string
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

// CheckSplit reports an error when the thresholds were fitted on split s,
// the split about to be scored: a rate matched on the scored data flatters
// the policy.
func (t *Threshold) CheckSplit(s rgc.Split) error {
	if t.Split == s.String() {
		return fmt.Errorf("rollout: threshold policy %s was fitted on split %s, the one scored: fit it on another (trainer fit-threshold --split val)", t.Source, s)
	}
	return nil
}

// ParsePolicy reads a policy named on a command line: "median" (the
// default, also for ""), "sample" or "sample:SEED", or "threshold:FILE"
// (a file of fitted thresholds, ThresholdFile).
func ParsePolicy(spec string) (Policy, error) {
	name, arg, hasArg := strings.Cut(spec, ":")
	switch name {
	case "", "median":
		if hasArg {
			return nil, fmt.Errorf("rollout: policy %q: median takes no argument", spec)
		}
		return Median{}, nil
	case "sample":
		if !hasArg {
			return Sample{Seed: 1}, nil
		}
		seed, err := strconv.ParseUint(arg, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("rollout: policy %q: seed: %w", spec, err)
		}
		return Sample{Seed: seed}, nil
	case "threshold":
		if arg == "" {
			return nil, errors.New("rollout: policy threshold needs a file: threshold:FILE (trainer fit-threshold writes it)")
		}
		return LoadThreshold(arg)
	}
	return nil, fmt.Errorf("rollout: unknown policy %q (median, sample[:SEED], threshold:FILE)", spec)
}

// CheckPolicy reports an error if p cannot serve every cell of ids.
func CheckPolicy(p Policy, ids []int) error {
	if t, ok := p.(*Threshold); ok {
		return t.Check(ids)
	}
	return nil
}
