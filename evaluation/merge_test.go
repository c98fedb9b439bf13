package evaluation

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSeeds checks that reports of one model, one per seed, are gathered
// into seed-averaged and per-seed scores, with policies free to differ and
// every other scoring setting required to agree.
func TestSeeds(t *testing.T) {
	v := func(xs ...float64) []float64 { return xs }
	z := v(0, 0, 0)
	rep := func(policy, split string, nll ...float64) *Report {
		return &Report{Scoring: Scoring{Recording: "r", Split: split, Bins: [2]int{10, 20}, Policy: policy},
			Models: []ModelResult{{Name: "m", Cells: scores(nll, z, z, z)}}}
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, rep("threshold:a.json", "test", 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	first, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	set, err := Seeds([]*Report{first, rep("threshold:b.json", "test", 3, 4, 5)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Seeds) != 2 || set.Cells[0].NLL != 2 || set.Cells[2].NLL != 4 || set.Scoring.Policy != "threshold:a.json" || set.Name != "m (x2)" {
		t.Errorf("%+v: want NLL 2,3,4 over 2 seeds, the first report's policy, name \"m (x2)\"", set)
	}
	one, err := Seeds([]*Report{first}, "m")
	if err != nil || one.Seeds != nil || one.Name != "m" {
		t.Errorf("one report: %+v, err %v; want no seeds, name m, no error", one, err)
	}
	other, err := Seeds([]*Report{rep("median", "val", 1, 2, 3)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CompareSets(set, other, 2000, 1); err == nil || !strings.Contains(err.Error(), "scored otherwise") {
		t.Errorf("sets on other splits: err %v, want one saying they were scored otherwise", err)
	}
	if c, err := CompareSets(set, one, 2000, 1); err != nil || c.Metrics["nll"].Seeds == nil {
		t.Errorf("sets differing only in policy: %v, err %v; want a comparison with a seed spread", c, err)
	}
	two := &Report{Scoring: first.Scoring, Models: []ModelResult{{Name: "zero", Cells: scores(v(9, 9, 9), z, z, z)}, {Name: "m2", Cells: scores(v(5, 6, 7), z, z, z)}}}
	named, err := Seeds([]*Report{first, two}, "m", "m2")
	if err != nil || named.Name != "m (x2)" || named.Cells[0].NLL != 3 || named.Cells[2].NLL != 5 {
		t.Errorf("one name per report: %+v, err %v; want NLL 3,4,5 (m and m2, not zero), name \"m (x2)\"", named, err)
	}
	for _, tc := range []struct {
		name  string
		reps  []*Report
		names []string
		want  string
	}{
		{"other split", []*Report{first, rep("median", "val", 1, 2, 3)}, nil, "scored otherwise"},
		{"unknown model", []*Report{{Scoring: first.Scoring, Models: []ModelResult{{Name: "x"}, {Name: "y"}}}}, nil, "name one"},
		{"none", nil, nil, "no reports"},
		{"names not one per report", []*Report{first, two, first}, []string{"m", "m2"}, "2 model names for 3 reports"},
		{"a report's name missing", []*Report{first, two}, []string{"m", "m"}, `report 2: no model "m"`},
	} {
		if _, err := Seeds(tc.reps, tc.names...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("want an error for a missing report")
	}
}
