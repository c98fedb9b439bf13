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
	avg, seeds, sc, err := Seeds([]*Report{first, rep("threshold:b.json", "test", 3, 4, 5)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(seeds) != 2 || avg[0].NLL != 2 || avg[2].NLL != 4 || sc.Policy != "threshold:a.json" {
		t.Errorf("avg %v, %d seeds, policy %q: want NLL 2,3,4 over 2 seeds, the first report's policy", avg, len(seeds), sc.Policy)
	}
	if _, one, _, err := Seeds([]*Report{first}, "m"); err != nil || one != nil {
		t.Errorf("one report: seeds %v, err %v; want none and no error", one, err)
	}
	for _, tc := range []struct {
		name string
		reps []*Report
		want string
	}{
		{"other split", []*Report{first, rep("median", "val", 1, 2, 3)}, "scored otherwise"},
		{"unknown model", []*Report{{Scoring: first.Scoring, Models: []ModelResult{{Name: "x"}, {Name: "y"}}}}, "name one"},
		{"none", nil, "no reports"},
	} {
		if _, _, _, err := Seeds(tc.reps, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("want an error for a missing report")
	}
}
