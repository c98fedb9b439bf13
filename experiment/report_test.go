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
	c, err := compare(pair{"a - b", "a", "b"}, []ModelReport{a, b}, 2000, 1)
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
