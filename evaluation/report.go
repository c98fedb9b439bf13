package evaluation

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rgcpred/rollout"
)

// Scoring says what a set of scores was computed on and how; the results
// of `trainer eval` (Report), of an experiment and of a replay start with
// it.
type Scoring struct {
	// Recording and Split say what was scored; Bins are the rollout's
	// compared bins [from, to).
	Recording string `json:"recording"`
	Split     string `json:"split"`
	Bins      [2]int `json:"rollout_bins"`
	// SigmaMs, BinMs and TauBins are the metrics' smoothing; Resamples and
	// Seed the bootstrap's; Stagger the rollout's start rule and Policy its
	// spike policy.
	SigmaMs   float64 `json:"sigma_ms"`
	BinMs     float64 `json:"bin_ms"`
	TauBins   float64 `json:"tau_bins"`
	Resamples int     `json:"resamples"`
	Seed      uint64  `json:"seed"`
	Stagger   bool    `json:"stagger"`
	Policy    string  `json:"policy"`
	// BlockBins is the length of the time blocks the cells' scores are
	// kept in (CellScores.Blocks), 0 for none.
	BlockBins int `json:"block_bins,omitempty"`
}

// Report is the result of an evaluation (Evaluate), the JSON `trainer eval
// --json` writes: the scoring settings, every model's scores and the
// paired comparisons asked for.
type Report struct {
	Scoring
	// Models are the evaluated models, in the order asked for.
	Models []ModelResult `json:"models"`
	// Comparisons are the paired per-cell differences asked for.
	Comparisons []Comparison `json:"comparisons,omitempty"`
}

// Model returns the evaluated model called name, nil if none.
func (r *Report) Model(name string) *ModelResult {
	for i := range r.Models {
		if r.Models[i].Name == name {
			return &r.Models[i]
		}
	}
	return nil
}

// ModelNames lists the evaluated models' names, comma separated.
func (r *Report) ModelNames() string {
	names := make([]string, len(r.Models))
	for i, m := range r.Models {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// Table is a score table, the one layout every command prints: a heading
// line (what was scored, the smoothing, the bootstrap), a header, then one
// row per model with the IQM over cells [95% bootstrap CI] of each of
// MetricNames.
type Table struct {
	// Scoring fills the heading.
	Scoring Scoring
	// Clauses are extra heading clauses placed before the IQM clause (e.g.
	// "budget per run 2000 steps"); Note follows the IQM clause.
	Clauses []string
	Note    string
	// Lead are the headers of extra columns between the model and the cell
	// count (right-aligned, 5 wide); Trail those of columns after the
	// metrics.
	Lead, Trail []string
	// Rows are the models.
	Rows []Row
}

// Row is one model's row of a Table.
type Row struct {
	// Name labels the model; Cells counts the cells scored.
	Name  string
	Cells int
	// Summary maps metrics of MetricNames to their summaries; a metric it
	// lacks prints as n/a.
	Summary map[string]rollout.Summary
	// Lead and Trail are the values of the table's extra columns.
	Lead, Trail []string
	// SeedRange, if set, gives per metric the lowest and highest of the
	// training seeds' own IQMs, printed after the interval as {min, max}.
	SeedRange map[string][2]float64
}

// WriteTable prints t.
func WriteTable(w io.Writer, t *Table) {
	s := &t.Scoring
	fmt.Fprintf(w, "%s, split %s, rollout bins [%d, %d), smoothing %g ms (%.2f bins)", s.Recording, s.Split, s.Bins[0], s.Bins[1], s.SigmaMs, s.TauBins)
	for _, c := range t.Clauses {
		fmt.Fprintf(w, "; %s", c)
	}
	fmt.Fprintf(w, "; IQM over cells [95%% bootstrap CI, %d resamples]", s.Resamples)
	if t.Note != "" {
		fmt.Fprintf(w, ", %s", t.Note)
	}
	fmt.Fprintln(w)
	nameW := len("model")
	for _, r := range t.Rows {
		nameW = max(nameW, len(r.Name))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", nameW, "model")
	for _, h := range t.Lead {
		fmt.Fprintf(&b, "  %5s", h)
	}
	colW := 26
	for _, r := range t.Rows {
		if r.SeedRange != nil {
			colW = 46
		}
	}
	fmt.Fprintf(&b, "  %5s  %-*s  %-*s  %-*s  %-*s", "cells", colW, "NLL (nats)", colW, "Van Rossum", colW, "Schreiber", colW, "Pearson")
	for _, h := range t.Trail {
		fmt.Fprintf(&b, "  %s", h)
	}
	fmt.Fprintln(w, b.String())
	for _, r := range t.Rows {
		b.Reset()
		fmt.Fprintf(&b, "%-*s", nameW, r.Name)
		for _, v := range r.Lead {
			fmt.Fprintf(&b, "  %5s", v)
		}
		fmt.Fprintf(&b, "  %5d", r.Cells)
		for _, name := range MetricNames {
			cell := "n/a"
			if s, ok := r.Summary[name]; ok {
				cell = fmt.Sprintf("%.4f [%.4f, %.4f]", s.IQM, s.Lo, s.Hi)
			}
			if rg, ok := r.SeedRange[name]; ok {
				cell += fmt.Sprintf(" {%.4f, %.4f}", rg[0], rg[1])
			}
			fmt.Fprintf(&b, "  %-*s", colW, cell)
		}
		for _, v := range r.Trail {
			fmt.Fprintf(&b, "  %s", v)
		}
		fmt.Fprintln(w, b.String())
	}
}

// Print prints the report: the score table, the spike counts of each
// model's rollouts, the NLL strides below 1 and the paired comparisons.
func (r *Report) Print(w io.Writer) {
	t := &Table{Scoring: r.Scoring}
	nameW := len("model")
	for _, m := range r.Models {
		t.Rows = append(t.Rows, Row{Name: m.Name, Cells: len(m.Cells), Summary: m.Summary})
		nameW = max(nameW, len(m.Name))
	}
	WriteTable(w, t)
	fmt.Fprintf(w, "spikes (policy %s): generated / recorded over the rollout bins, cells that fired, median per-cell ratio\n", r.Policy)
	for _, m := range r.Models {
		var gen, recd float64
		var ratios []float64
		fired := 0
		for _, c := range m.Cells {
			gen += c.GeneratedSpikes
			recd += c.RecordedSpikes
			if c.GeneratedSpikes > 0 {
				fired++
			}
			if c.RecordedSpikes > 0 {
				ratios = append(ratios, c.GeneratedSpikes/c.RecordedSpikes)
			}
		}
		med := math.NaN()
		if len(ratios) > 0 {
			slices.Sort(ratios)
			med = ratios[len(ratios)/2]
		}
		fmt.Fprintf(w, "  %-*s  %6.0f / %6.0f = %.3f, %d of %d cells fired, median ratio %.3f", nameW, m.Name, gen, recd, gen/max(recd, 1), fired, len(m.Cells), med)
		if m.Policy != "" {
			fmt.Fprintf(w, " (policy %s)", m.Policy)
		}
		fmt.Fprintln(w)
		if silent := silentCells(m); len(silent) > 0 && m.Kind != "zero" && m.Kind != "zero-pooled" {
			fmt.Fprintf(w, "  %-*s  silent where the recording fired: cells %s\n", nameW, "", strings.Join(silent, ", "))
		}
	}
	for _, m := range r.Models {
		if m.NLLStride > 1 {
			fmt.Fprintf(w, "%s: NLL over every %dth window end (--nll-stride 1 for every window)\n", m.Name, m.NLLStride)
		}
	}
	PrintComparisons(w, r.Comparisons)
}

// silentCells lists the cluster ids of m's cells whose rollout generated no
// spike though the recording has some, each with its recorded count.
func silentCells(m ModelResult) []string {
	var out []string
	for _, c := range m.Cells {
		if c.GeneratedSpikes == 0 && c.RecordedSpikes > 0 {
			out = append(out, fmt.Sprintf("%d (%.0f recorded)", c.ClusterID, c.RecordedSpikes))
		}
	}
	return out
}

// WriteJSON writes v as indented JSON, newline-terminated, to path,
// creating its directory.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
