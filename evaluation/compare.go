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
	// two are equal.
	ABetter int `json:"a_better_cells"`
	Ties    int `json:"tied_cells"`
	// LowerIsBetter says which sign favours A: negative when true.
	LowerIsBetter bool `json:"lower_is_better"`
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

// PrintComparisons prints paired differences, one row per comparison;
// nothing when there are none.
func PrintComparisons(w io.Writer, cs []Comparison) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, "\npaired differences A - B per cell: IQM [95% bootstrap CI], cells where A is better")
	nameW := len("comparison")
	for _, c := range cs {
		nameW = max(nameW, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  %-34s  %-34s  %-34s  %s\n", nameW, "comparison", "NLL", "Van Rossum", "Schreiber", "Pearson")
	for _, c := range cs {
		var b strings.Builder
		fmt.Fprintf(&b, "%-*s", nameW, c.Name)
		for _, metric := range MetricNames {
			d := c.Metrics[metric]
			fmt.Fprintf(&b, "  %-34s", fmt.Sprintf("%+.4f [%+.4f, %+.4f] %d/%d", d.IQM, d.Lo, d.Hi, d.ABetter, d.N))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
