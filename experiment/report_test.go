package experiment

import (
	"math"
	"reflect"
	"rgcpred/evaluation"
	"strings"
	"testing"
)

func TestComparisons(t *testing.T) {
	models := func(names ...string) []ModelReport {
		var m []ModelReport
		for _, n := range names {
			kind := "config"
			if n == "glm" || n == "zero" {
				kind = n
			}
			m = append(m, ModelReport{Name: n, Kind: kind})
		}
		return m
	}
	paper := []string{"gpt-a-cat-cpu", "gpt-a-logmix-cpu", "gpt-b-cat-cpu", "gpt-b-logmix-cpu"}
	for _, tc := range []struct {
		name    string
		configs []string
		models  []ModelReport
		extra   []string
		want    []string
		err     string
	}{
		{"paper grid", paper, models(append(paper, "zero", "glm")...), nil, []string{
			"cat - logmix (gpt-a-cpu)", "cat - logmix (gpt-b-cpu)", "gpt-b - gpt-a (cat-cpu)", "gpt-b - gpt-a (logmix-cpu)",
			"gpt-a-cat-cpu - zero", "gpt-a-logmix-cpu - zero", "gpt-b-cat-cpu - zero", "gpt-b-logmix-cpu - zero",
			"gpt-a-cat-cpu - glm", "gpt-a-logmix-cpu - glm", "gpt-b-cat-cpu - glm", "gpt-b-logmix-cpu - glm"}, ""},
		{"order of the grid does not matter", []string{"gpt-b-logmix", "gpt-a-cat"}, models("gpt-b-logmix", "gpt-a-cat"), nil, nil, ""},
		{"presets are not mixed", []string{"gpt-a-logmix", "gpt-a-cat-cpu"}, models("gpt-a-logmix", "gpt-a-cat-cpu"), nil, nil, ""},
		{"logmix first in the grid", []string{"gpt-a-logmix", "gpt-a-cat"}, models("gpt-a-logmix", "gpt-a-cat"), nil,
			[]string{"cat - logmix (gpt-a)"}, ""},
		{"extra", []string{"gpt-b-cat", "gpt-a-logmix"}, models("gpt-b-cat", "gpt-a-logmix", "glm"), []string{"gpt-b-cat-paper:gpt-a-logmix", "glm:gpt-b-cat"},
			[]string{"gpt-b-cat - glm", "gpt-a-logmix - glm", "gpt-b-cat - gpt-a-logmix", "glm - gpt-b-cat"}, ""},
		{"unknown extra", []string{"gpt-a-cat"}, models("gpt-a-cat"), []string{"gpt-a-cat:glm"}, nil, "no model glm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pairs, err := comparisons(tc.configs, tc.models, tc.extra)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pairs {
				got = append(got, p.name)
				if !strings.HasPrefix(p.name, p.a) && !strings.Contains(p.name, " - ") {
					t.Errorf("pair %+v", p)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("comparisons\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestCompare checks a paired comparison's signs and counts.
func TestCompare(t *testing.T) {
	cells := func(nll, schreiber []float64) []evaluation.CellScores {
		var c []evaluation.CellScores
		for i := range nll {
			c = append(c, evaluation.CellScores{ClusterID: i, NLL: nll[i], Schreiber: schreiber[i]})
		}
		return c
	}
	a := ModelReport{Name: "a", Cells: cells([]float64{1, 2, 3, 4}, []float64{0.5, 0.5, 0.5, 0.5})}
	b := ModelReport{Name: "b", Cells: cells([]float64{1.5, 2.5, 3, 3}, []float64{0.4, 0.6, 0.5, 0.1})}
	c, err := compare(pair{"a - b", "a", "b"}, []ModelReport{a, b}, evaluation.Scoring{}, 2000, 1)
	if err != nil {
		t.Fatal(err)
	}
	nll := c.Metrics["nll"]
	// Differences -0.5, -0.5, 0, 1: A is better (lower) in 2 cells.
	if nll.ABetter != 2 || nll.Ties != 1 || !nll.LowerIsBetter || nll.N != 4 || math.Abs(nll.IQM-(-0.25)) > 1e-12 || nll.Mean != 0 {
		t.Errorf("nll difference %+v", nll)
	}
	sch := c.Metrics["schreiber"]
	// Differences 0.1, -0.1, 0, 0.4: A is better (higher) in 2 cells.
	if sch.ABetter != 2 || sch.Ties != 1 || sch.LowerIsBetter || !(sch.Lo <= sch.IQM && sch.IQM <= sch.Hi) {
		t.Errorf("schreiber difference %+v", sch)
	}
}

// TestCompareSeeds checks the spread of a comparison over seeds: seed k of
// A against seed k of B, or against a baseline without seeds; the range,
// the sign agreement and the per-configuration range of each seed's IQM.
func TestCompareSeeds(t *testing.T) {
	cells := func(nll ...float64) []evaluation.CellScores {
		var c []evaluation.CellScores
		for i, v := range nll {
			c = append(c, evaluation.CellScores{ClusterID: i, NLL: v})
		}
		return c
	}
	run := func(c []evaluation.CellScores) RunReport {
		s, err := evaluation.Summarise(c, 2000, 1)
		if err != nil {
			t.Fatal(err)
		}
		return RunReport{Cells: c, Summary: s}
	}
	// Per-seed NLLs of A (4 cells, all equal within a seed); B and the
	// baseline are flat.
	a1, a2, a3 := cells(1, 1, 1, 1), cells(0.8, 0.8, 0.8, 0.8), cells(1.3, 1.3, 1.3, 1.3)
	a := ModelReport{Name: "a", Kind: "config", Cells: evaluation.AverageRepeats([][]evaluation.CellScores{a1, a2, a3}),
		Runs: []RunReport{run(a1), run(a2), run(a3)}}
	b1 := cells(1.2, 1.2, 1.2, 1.2)
	b := ModelReport{Name: "b", Kind: "config", Cells: evaluation.AverageRepeats([][]evaluation.CellScores{b1, b1, b1}),
		Runs: []RunReport{run(b1), run(b1), run(b1)}}
	base := ModelReport{Name: "zero", Kind: "zero", Cells: cells(1.1, 1.1, 1.1, 1.1)}
	for _, tc := range []struct {
		b           ModelReport
		iqms        []float64
		lo, hi, all float64
		agree       int
	}{
		// Seed-averaged A is 1.0333: -0.1667 against b; seeds -0.2, -0.4, +0.1.
		{b, []float64{-0.2, -0.4, 0.1}, -0.4, 0.1, 1.0333333333333334 - 1.2, 2},
		// Against the baseline: -0.1, -0.3, +0.2; averaged -0.0667.
		{base, []float64{-0.1, -0.3, 0.2}, -0.3, 0.2, 1.0333333333333334 - 1.1, 2},
	} {
		c, err := compare(pair{"a - " + tc.b.Name, "a", tc.b.Name}, []ModelReport{a, tc.b}, evaluation.Scoring{}, 2000, 1)
		if err != nil {
			t.Fatal(err)
		}
		d := c.Metrics["nll"]
		if math.Abs(d.IQM-tc.all) > 1e-12 || d.Seeds == nil {
			t.Fatalf("a - %s: IQM %g (want %g), seeds %+v", tc.b.Name, d.IQM, tc.all, d.Seeds)
		}
		for k, v := range tc.iqms {
			if math.Abs(d.Seeds.IQMs[k]-v) > 1e-12 {
				t.Errorf("a - %s seed %d: paired IQM %g, want %g", tc.b.Name, k+1, d.Seeds.IQMs[k], v)
			}
		}
		if math.Abs(d.Seeds.Min-tc.lo) > 1e-12 || math.Abs(d.Seeds.Max-tc.hi) > 1e-12 || d.Seeds.Agree != tc.agree {
			t.Errorf("a - %s: seeds %+v, want {%g, %g} %d agree", tc.b.Name, d.Seeds, tc.lo, tc.hi, tc.agree)
		}
	}
	// Two baselines: no seeds, no spread.
	c, err := compare(pair{"zero - zero", "zero", "zero"}, []ModelReport{base}, evaluation.Scoring{}, 2000, 1)
	if err != nil || c.Metrics["nll"].Seeds != nil {
		t.Errorf("baselines: %v, seeds %+v", err, c.Metrics["nll"].Seeds)
	}
	rg := seedRange(a.Runs)["nll"]
	if rg != [2]float64{0.8, 1.3} {
		t.Errorf("seed range %v, want [0.8 1.3]", rg)
	}
	var out strings.Builder
	evaluation.PrintComparisons(&out, []evaluation.Comparison{*mustCompare(t, a, b)})
	if !strings.Contains(out.String(), "{-0.4000, +0.1000} 2/3") {
		t.Errorf("printed comparison lacks the seed spread:\n%s", out.String())
	}
}

func mustCompare(t *testing.T, a, b ModelReport) *evaluation.Comparison {
	t.Helper()
	c, err := compare(pair{a.Name + " - " + b.Name, a.Name, b.Name}, []ModelReport{a, b}, evaluation.Scoring{}, 2000, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
