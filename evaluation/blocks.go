package evaluation

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"rgcpred/rgc"
	"rgcpred/rollout"
)

// CellBlocks are one cell's scores split into time blocks of
// Scoring.BlockBins bins (rollout.BlockCount): the NLL's blocks over the
// window ends, the rollout metrics' over the compared bins.
type CellBlocks struct {
	NLL   []rollout.NLLBlock   `json:"nll"`
	Train []rollout.TrainBlock `json:"train"`
}

// BlockInterval is the 95% interval of a paired IQM from a time-block x
// cell bootstrap (rollout.BlockBootstrap).
type BlockInterval struct {
	Lo float64 `json:"ci_lo"`
	Hi float64 `json:"ci_hi"`
	// Blocks is the number of time blocks resampled, Seconds their length.
	Blocks  int     `json:"blocks"`
	Seconds float64 `json:"seconds"`
}

// blockValue returns the named metric of a cell's blocks, block k counted
// w[k] times.
func blockValue(b *CellBlocks, metric string, w []float64) float64 {
	if metric == "nll" {
		return rollout.BlockNLL(b.NLL, w)
	}
	s := rollout.BlockScores(b.Train, w)
	switch metric {
	case "van_rossum":
		return s.VanRossum
	case "schreiber":
		return s.Schreiber
	case "pearson":
		return s.Pearson
	}
	panic("evaluation: unknown metric " + metric)
}

// blockCount returns the number of blocks of metric in b.
func blockCount(b *CellBlocks, metric string) int {
	if metric == "nll" {
		return len(b.NLL)
	}
	return len(b.Train)
}

// repeats returns m's per-cell scores of each repeat: Repeats, or Cells
// for a single one.
func (m *ModelResult) repeats() [][]CellScores {
	if len(m.Repeats) > 0 {
		return m.Repeats
	}
	return [][]CellScores{m.Cells}
}

// BlockBins is the length in whole bins of time blocks of seconds, the
// nearest (0 for none): the one conversion of trainer eval's and trainer
// experiment's --block-seconds.
func BlockBins(seconds float64) int {
	if seconds <= 0 {
		return 0
	}
	return int(math.Round(seconds * rgc.BinRateHz))
}

// BlockSeconds is the length of the time blocks in seconds, to the
// millisecond (whole bins of rgc.BinMs), 0 for none.
func (s Scoring) BlockSeconds() float64 {
	return math.Round(float64(s.BlockBins)/rgc.BinRateHz*1000) / 1000
}

// MergeBlocks returns cells with every k consecutive time blocks merged
// into one (a remainder joins the last), for a coarser block bootstrap
// than the one scored; cells without blocks are returned as they are.
func MergeBlocks(cells []CellScores, k int) []CellScores {
	out := slices.Clone(cells)
	for i, c := range cells {
		if c.Blocks == nil || k <= 1 {
			continue
		}
		out[i].Blocks = &CellBlocks{NLL: mergeNLL(c.Blocks.NLL, k), Train: mergeTrain(c.Blocks.Train, k)}
	}
	return out
}

func mergeNLL(b []rollout.NLLBlock, k int) []rollout.NLLBlock {
	out := make([]rollout.NLLBlock, rollout.BlockCount(len(b), k))
	for i, x := range b {
		o := &out[min(i/k, len(out)-1)]
		o.Sum += x.Sum
		o.Windows += x.Windows
	}
	return out
}

func mergeTrain(b []rollout.TrainBlock, k int) []rollout.TrainBlock {
	out := make([]rollout.TrainBlock, rollout.BlockCount(len(b), k))
	for i, x := range b {
		out[min(i/k, len(out)-1)].Add(x, 1)
	}
	return out
}

// HasBlocks reports whether every cell of every set holds time blocks.
func HasBlocks(sets ...[]CellScores) bool {
	for _, cells := range sets {
		for _, c := range cells {
			if c.Blocks == nil {
				return false
			}
		}
	}
	return len(sets) > 0
}

// AddBlocks fills each metric's Block with the time-block x cell interval
// of the paired IQM (rollout.BlockBootstrap): a and b are each a list of
// repeats (seeds) of per-cell scores with blocks, in c's cell order, and a
// cell's value is the mean over A's repeats less the mean over B's;
// seconds is the blocks' length, for the report.
func (c *Comparison) AddBlocks(a, b [][]CellScores, seconds float64, resamples int, seed uint64) error {
	if len(a) == 0 || len(b) == 0 {
		return errors.New("block bootstrap: no scores")
	}
	if !HasBlocks(a...) || !HasBlocks(b...) {
		return errors.New("block bootstrap: the scores hold no time blocks (trainer eval --block-seconds keeps them)")
	}
	n := len(a[0])
	for _, metric := range MetricNames {
		nb := blockCount(a[0][0].Blocks, metric)
		for _, side := range [][][]CellScores{a, b} {
			for _, rep := range side {
				if len(rep) != n {
					return fmt.Errorf("block bootstrap: %d and %d cells", len(rep), n)
				}
				for _, cs := range rep {
					if got := blockCount(cs.Blocks, metric); got != nb {
						return fmt.Errorf("block bootstrap, %s: cell %d has %d blocks, not %d", metric, cs.ClusterID, got, nb)
					}
				}
			}
		}
		mean := func(side [][]CellScores, cell int, w []float64) float64 {
			var s float64
			for _, rep := range side {
				s += blockValue(rep[cell].Blocks, metric, w)
			}
			return s / float64(len(side))
		}
		lo, hi, err := rollout.BlockBootstrap(n, nb, func(cell int, w []float64) float64 {
			return mean(a, cell, w) - mean(b, cell, w)
		}, resamples, seed)
		if err != nil {
			return fmt.Errorf("%s: %w", metric, err)
		}
		d := c.Metrics[metric]
		d.Block = &BlockInterval{Lo: lo, Hi: hi, Blocks: nb, Seconds: seconds}
		c.Metrics[metric] = d
	}
	return nil
}
