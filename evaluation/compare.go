package evaluation

import (
	"fmt"
	"io"
	"strings"

	"rgcpred/rollout"
)

// Comparison is a paired comparison of two models over the same cells:
// for each metric, the per-cell differences A - B summarised by their IQM
// with a 95% percentile-bootstrap interval.
type Comparison struct {
	// Name labels the comparison, e.g. "cat - logmix (gpt-a-cpu)"; A and
	// B are the models compared.
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
	// Metrics maps each of MetricNames to the summary of A - B.
	Metrics map[string]Difference `json:"metrics"`
}

// Difference summarises per-cell differences A - B of one metric.
type Difference struct {
	// Summary is the IQM of the differences with its 95% bootstrap
	// interval, over N cells.
	rollout.Summary
	// Mean is the mean difference.
	Mean float64 `json:"mean"`
	// ABetter counts the cells where A scores better (lower for NLL and
	// Van Rossum, higher for Schreiber and Pearson); Ties those where the
	// two are equal (e.g. both silent); the rest A scores worse.
	ABetter int `json:"a_better_cells"`
	Ties    int `json:"tied_cells"`
	// LowerIsBetter says which sign favours A: negative when true.
	LowerIsBetter bool `json:"lower_is_better"`
	// Seeds, when the models have several training seeds, spreads the
	// comparison over them; nil otherwise.
	Seeds *SeedSpread `json:"seeds,omitempty"`
	// Block is the interval of a time-block x cell bootstrap (AddBlocks)
	// when the scores were kept in time blocks; nil otherwise.
	Block *BlockInterval `json:"block,omitempty"`
}

// SeedSpread is how a paired comparison of seed-averaged scores varies
// over the training seeds: each seed's own paired IQM over cells (seed k of
// A against seed k of B, or against B itself when B has no seeds).
type SeedSpread struct {
	// IQMs are the seeds' own paired IQMs, in seed order; Min and Max
	// their range.
	IQMs []float64 `json:"iqms"`
	Min  float64   `json:"min"`
	Max  float64   `json:"max"`
	// Agree counts the seeds whose paired IQM has the sign of the
	// seed-averaged IQM (0 counts as agreeing with 0).
	Agree int `json:"agree"`
}

// Spread fills d.Seeds from the seeds' own comparisons, one per seed, of
// the same metric.
func (d *Difference) Spread(perSeed []float64) {
	if len(perSeed) == 0 {
		return
	}
	s := &SeedSpread{IQMs: perSeed, Min: perSeed[0], Max: perSeed[0]}
	for _, v := range perSeed {
		s.Min, s.Max = min(s.Min, v), max(s.Max, v)
		if (v > 0) == (d.IQM > 0) && (v < 0) == (d.IQM < 0) {
			s.Agree++
		}
	}
	d.Seeds = s
}

// Compare summarises the per-cell differences A - B of every metric
// between two models scored on the same cells (in the same order), with
// 95% percentile-bootstrap intervals of the IQM.
func Compare(name, nameA, nameB string, a, b []CellScores, resamples int, seed uint64) (*Comparison, error) {
	if len(a) != len(b) || len(a) == 0 {
		return nil, fmt.Errorf("comparison %s: %d and %d cells", name, len(a), len(b))
	}
	for i := range a {
		if a[i].ClusterID != b[i].ClusterID {
			return nil, fmt.Errorf("comparison %s: cell %d is %d in %s and %d in %s", name, i, a[i].ClusterID, nameA, b[i].ClusterID, nameB)
		}
	}
	c := &Comparison{Name: name, A: nameA, B: nameB, Metrics: map[string]Difference{}}
	d := make([]float64, len(a))
	for _, metric := range MetricNames {
		lower := LowerIsBetter(metric)
		diff := Difference{LowerIsBetter: lower}
		for i := range d {
			d[i] = a[i].Metric(metric) - b[i].Metric(metric)
			diff.Mean += d[i] / float64(len(d))
			switch {
			case d[i] == 0:
				diff.Ties++
			case (d[i] < 0) == lower:
				diff.ABetter++
			}
		}
		s, err := rollout.Bootstrap(d, resamples, seed)
		if err != nil {
			return nil, fmt.Errorf("comparison %s, %s: %w", c.Name, metric, err)
		}
		diff.Summary = s
		c.Metrics[metric] = diff
	}
	return c, nil
}

// CompareSeeds is Compare of seed-averaged per-cell scores a and b, spread
// over the training seeds when either model has them (seedsA, seedsB: each
// seed's own per-cell scores, nil for a model without seeds): seed k of A
// against seed k of B, or against B itself when B has no seeds, the model
// with fewer seeds repeating its last. The interval is over cells of the
// seed-averaged differences; the spread gives each seed's own paired IQM
// and how many seeds agree in sign.
func CompareSeeds(name, nameA, nameB string, a, b []CellScores, seedsA, seedsB [][]CellScores, resamples int, seed uint64) (*Comparison, error) {
	c, err := Compare(name, nameA, nameB, a, b, resamples, seed)
	if err != nil {
		return nil, err
	}
	n := max(len(seedsA), len(seedsB))
	if n == 0 {
		return c, nil
	}
	pick := func(all []CellScores, seeds [][]CellScores, k int) []CellScores {
		if len(seeds) == 0 {
			return all
		}
		return seeds[min(k, len(seeds)-1)]
	}
	perSeed := map[string][]float64{}
	for k := range n {
		ck, err := Compare(name, nameA, nameB, pick(a, seedsA, k), pick(b, seedsB, k), resamples, seed)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", k+1, err)
		}
		for metric, d := range ck.Metrics {
			perSeed[metric] = append(perSeed[metric], d.IQM)
		}
	}
	for metric, d := range c.Metrics {
		d.Spread(perSeed[metric])
		c.Metrics[metric] = d
	}
	return c, nil
}

// PrintComparisons prints paired differences, one row per comparison;
// nothing when there are none.
func PrintComparisons(w io.Writer, cs []Comparison) {
	if len(cs) == 0 {
		return
	}
	seeds, blocks := false, 0.0
	for _, c := range cs {
		for _, d := range c.Metrics {
			seeds = seeds || d.Seeds != nil
			if d.Block != nil {
				blocks = d.Block.Seconds
			}
		}
	}
	colW := 40
	fmt.Fprint(w, "\npaired differences A - B per cell: IQM [95% bootstrap CI over cells]")
	if blocks > 0 {
		fmt.Fprintf(w, " [95%% CI over %g s time blocks x cells]", blocks)
		colW += 28
	}
	fmt.Fprint(w, ", cells where A is better/tied/worse")
	if seeds {
		fmt.Fprint(w, ";\nwith seeds: {lowest, highest} of the seeds' own paired IQMs, seeds agreeing in sign")
		colW += 30
	}
	fmt.Fprintln(w)
	nameW := len("comparison")
	for _, c := range cs {
		nameW = max(nameW, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  %-*s  %-*s  %-*s  %s\n", nameW, "comparison", colW, "NLL", colW, "Van Rossum", colW, "Schreiber", "Pearson")
	for _, c := range cs {
		var b strings.Builder
		fmt.Fprintf(&b, "%-*s", nameW, c.Name)
		for _, metric := range MetricNames {
			d := c.Metrics[metric]
			cell := fmt.Sprintf("%+.4f [%+.4f, %+.4f]", d.IQM, d.Lo, d.Hi)
			if d.Block != nil {
				cell += fmt.Sprintf(" [%+.4f, %+.4f]", d.Block.Lo, d.Block.Hi)
			}
			cell += fmt.Sprintf(" %d/%d/%d", d.ABetter, d.Ties, d.N-d.ABetter-d.Ties)
			if d.Seeds != nil {
				cell += fmt.Sprintf(" {%+.4f, %+.4f} %d/%d", d.Seeds.Min, d.Seeds.Max, d.Seeds.Agree, len(d.Seeds.IQMs))
			}
			fmt.Fprintf(&b, "  %-*s", colW, cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
