package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"rgcpred/rgc"
)

// TestSoup checks that a soup is the element-wise mean of its checkpoints
// and that checkpoints which cannot be averaged are refused by reason.
func TestSoup(t *testing.T) {
	a, b := testCheckpoint(t, "gpt-a-cat-cpu", 3), testCheckpoint(t, "gpt-a-cat-cpu", 3)
	for _, v := range b.Weights.Tensors {
		for i := range v {
			v[i] = 2*v[i] + 1
		}
	}
	s, err := Soup([]*Checkpoint{a, b})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range s.Weights.Tensors {
		for i, g := range got {
			want := (a.Weights.Tensors[name][i] + b.Weights.Tensors[name][i]) / 2
			if math.Abs(float64(g-want)) > 1e-6*(1+math.Abs(float64(want))) {
				t.Fatalf("%s[%d] = %g, want %g", name, i, g, want)
			}
		}
	}
	if s.Provenance.ValNLL != 0 || s.TrainState != nil || !slices.Equal(s.CellIDs, a.CellIDs) {
		t.Errorf("soup metadata: val %g, train state %d bytes, cells %v", s.Provenance.ValNLL, len(s.TrainState), s.CellIDs)
	}

	otherCells := testCheckpoint(t, "gpt-a-cat-cpu", 3)
	otherCells.CellIDs[0] = 1
	otherMode := testCheckpoint(t, "gpt-a-cat-cpu", 3)
	otherMode.StimMode = rgc.StimZeroPhase
	a.StimMode = rgc.StimCausal
	otherTime := testCheckpoint(t, "gpt-a-cat-cpu", 3)
	otherTime.StimMode, otherTime.Horizon = rgc.StimCausal, 40
	for _, tc := range []struct {
		name  string
		other *Checkpoint
		want  string
	}{
		{"config", testCheckpoint(t, "gpt-b-cat-cpu", 3), "holds"},
		{"cells", otherCells, "other cells"},
		{"mode", otherMode, "bins"},
		{"time base", otherTime, "time base"},
	} {
		if _, err := Soup([]*Checkpoint{a, tc.other}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Soup(nil); err == nil {
		t.Error("want an error for no checkpoints")
	}
}

// TestWithCells checks a re-cut: kept cells keep their rows in the new
// order, a new cell gets the mean row, shared tensors are copied, and the
// source is not modified.
func TestWithCells(t *testing.T) {
	c := testCheckpoint(t, "gpt-a-cat-cpu", 3) // cells 100, 107, 114
	before := slices.Clone(c.Weights.Tensors[ParamCellEmb])
	w, added, err := c.WithCells([]int{114, 5, 100})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Weights.Config.Width()
	if added != 1 || w.Config.NumCells != 3 {
		t.Fatalf("added %d, %d cells; want 1 and 3", added, w.Config.NumCells)
	}
	old, emb := c.Weights.Tensors[ParamCellEmb], w.Tensors[ParamCellEmb]
	for j := range d {
		mean := (old[j] + old[d+j] + old[2*d+j]) / 3
		for r, want := range []float32{old[2*d+j], mean, old[j]} {
			if got := emb[r*d+j]; math.Abs(float64(got-want)) > 1e-6 {
				t.Fatalf("row %d col %d = %g, want %g", r, j, got, want)
			}
		}
	}
	if !slices.Equal(w.Tensors["head.weight"], c.Weights.Tensors["head.weight"]) || !slices.Equal(before, old) {
		t.Error("shared tensors must be copied and the source left alone")
	}
	w.Tensors["head.weight"][0]++
	if w.Tensors["head.weight"][0] == c.Weights.Tensors["head.weight"][0] {
		t.Error("re-cut weights share memory with the source")
	}
	for _, ids := range [][]int{nil, {100, 100}} {
		if _, _, err := c.WithCells(ids); err == nil {
			t.Errorf("cells %v: want an error", ids)
		}
	}
}
