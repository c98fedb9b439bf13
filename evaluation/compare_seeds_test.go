package evaluation

import (
	"math"
	"testing"
)

// TestCompareSeeds checks the spread of a seed-averaged comparison: each
// seed's own paired IQM equals Compare of that seed alone, a model without
// seeds is compared as it is, and seeds agreeing in sign are counted.
func TestCompareSeeds(t *testing.T) {
	v := func(xs ...float64) []float64 { return xs }
	flat := v(0, 0, 0, 0, 0, 0)
	seed1 := scores(v(1.0, 1.1, 1.2, 1.3, 1.4, 1.5), flat, flat, flat)
	seed2 := scores(v(1.2, 1.3, 1.4, 1.5, 1.6, 1.7), flat, flat, flat)
	seed3 := scores(v(0.7, 0.8, 0.9, 1.0, 1.1, 1.2), flat, flat, flat)
	glm := scores(v(1.1, 1.2, 1.3, 1.4, 1.5, 1.6), flat, flat, flat)
	seeds := [][]CellScores{seed1, seed2, seed3}
	avg := AverageRepeats(seeds)
	for _, tc := range []struct {
		name         string
		seedsA       [][]CellScores
		seedsB       [][]CellScores
		iqms         []float64
		agree, nSeed int
	}{
		{"no seeds", nil, nil, nil, 0, 0},
		{"A has seeds, B none", seeds, nil, v(-0.1, +0.1, -0.4), 2, 3},
		{"both with seeds", seeds, [][]CellScores{glm, glm, glm}, v(-0.1, +0.1, -0.4), 2, 3},
	} {
		c, err := CompareSeeds("a - glm", "a", "glm", avg, glm, tc.seedsA, tc.seedsB, 2000, 1)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d := c.Metrics["nll"]
		if math.Abs(d.IQM-(-0.1333)) > 1e-3 {
			t.Errorf("%s: seed-averaged IQM %.4f, want -0.1333", tc.name, d.IQM)
		}
		if tc.nSeed == 0 {
			if d.Seeds != nil {
				t.Errorf("%s: want no spread, got %+v", tc.name, d.Seeds)
			}
			continue
		}
		if d.Seeds == nil || len(d.Seeds.IQMs) != tc.nSeed {
			t.Fatalf("%s: spread %+v, want %d seeds", tc.name, d.Seeds, tc.nSeed)
		}
		for k, want := range tc.iqms {
			if math.Abs(d.Seeds.IQMs[k]-want) > 1e-9 {
				t.Errorf("%s: seed %d paired IQM %.4f, want %.4f", tc.name, k+1, d.Seeds.IQMs[k], want)
			}
		}
		if d.Seeds.Agree != tc.agree || d.Seeds.Min != -0.4 || math.Abs(d.Seeds.Max-0.1) > 1e-9 {
			t.Errorf("%s: agree %d (want %d), range [%.4f, %.4f] (want [-0.4, 0.1])", tc.name, d.Seeds.Agree, tc.agree, d.Seeds.Min, d.Seeds.Max)
		}
	}
	if _, err := CompareSeeds("x", "a", "b", avg, glm, [][]CellScores{seed1, seed2[:3]}, nil, 2000, 1); err == nil {
		t.Error("want an error for a seed with other cells")
	}
}
