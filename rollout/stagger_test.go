package rollout

import (
	"context"
	"slices"
	"testing"

	"rgcpred/rgc"
)

func TestStartOffset(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{1, []int{0}},
		{2, []int{0, 40}},
		{4, []int{0, 20, 40, 60}},
		{3, []int{0, 26, 53}},
		{60, nil}, // checked below: floor(i*80/60)
		{200, nil},
	} {
		got := make([]int, tc.n)
		for i := range got {
			got[i] = StartOffset(i, tc.n)
		}
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("n %d: offsets %v, want %v", tc.n, got, tc.want)
		}
		for i, o := range got {
			if o != i*rgc.Horizon/tc.n || o < 0 || o >= rgc.Horizon || (i > 0 && o < got[i-1]) {
				t.Fatalf("n %d: offset %d of cell %d out of rule", tc.n, o, i)
			}
		}
	}
	// 60 cells over 80 bins: no bin holds more than one first window.
	seen := map[int]int{}
	for i := range 60 {
		seen[StartOffset(i, 60)]++
	}
	for o, c := range seen {
		if c > 1 {
			t.Errorf("offset %d shared by %d of 60 cells", o, c)
		}
	}
	for _, bad := range [][2]int{{-1, 4}, {4, 4}, {0, 0}} {
		if o := StartOffset(bad[0], bad[1]); o != 0 {
			t.Errorf("StartOffset(%d, %d) = %d, want 0", bad[0], bad[1], o)
		}
	}
	if got := StartOffsets([]int{3, 1}, 4, true); !slices.Equal(got, []int{60, 20}) {
		t.Errorf("StartOffsets = %v", got)
	}
	if got := StartOffsets([]int{3, 1}, 4, false); !slices.Equal(got, []int{0, 0}) {
		t.Errorf("StartOffsets without stagger = %v", got)
	}
}

// naiveStaggered is naiveRollout for a cell whose first window ends at
// start >= first: bins first+1..start hold the recorded spikes.
func naiveStaggered(cell *rgc.Cell, first, start, to int) []float64 {
	gen := make([]float64, to-first-1)
	for _, b := range cell.SpikeBins {
		if int(b) > first && int(b) <= min(start, to-1) {
			gen[int(b)-first-1] = 1
		}
	}
	naiveFill(gen, cell.ClusterID, first, start, to)
	return gen
}

// TestRunStagger: with Options.Stagger each cell (ranked by cluster id, not
// by its place in Options.Cells) starts StartOffset bins late, sees the
// recorded spikes up to its own first window end and then its own, and its
// train holds the recorded spikes before its start; batching changes
// nothing; without Stagger the result is the unstaggered one.
func TestRunStagger(t *testing.T) {
	const bins = 30000
	rec := testRecording(bins, every(bins, 13, 0), every(bins, 50, 7), every(bins, 9, 4), every(bins, 3, 1))
	first, from, to, _ := Bins(rec, rgc.Test)
	cells := []int{3, 0, 1, 2} // cluster ids 13, 10, 11, 12: ranks 3, 0, 1, 2
	wantOff := []int{60, 0, 20, 40}
	for _, mb := range []int{0, 1, 3} {
		starts := map[int]int{}
		for i, c := range cells {
			starts[rec.Cells[c].ClusterID] = first + wantOff[i]
		}
		p := &checkingPredictor{rec: rec, first: first, starts: starts, gen: map[int]map[int]bool{}}
		var last Progress
		res, err := Run(context.Background(), rec, p, Options{Split: rgc.Test, Cells: cells, MaxBatch: mb, Stagger: true,
			Progress: func(pr Progress) { last = pr }})
		if err != nil {
			t.Fatal(err)
		}
		if p.err != nil {
			t.Fatalf("max batch %d: %v", mb, p.err)
		}
		if res.From != from || res.To != to {
			t.Fatalf("compared bins [%d,%d), want [%d,%d)", res.From, res.To, from, to)
		}
		wantTotal := 0
		for i, c := range cells {
			tr := res.Trains[i]
			if tr.Start != first+wantOff[i] {
				t.Fatalf("cell %d: start %d, want %d", c, tr.Start, first+wantOff[i])
			}
			wantTotal += to - 1 - tr.Start
			want := naiveStaggered(&rec.Cells[c], first, tr.Start, to)
			if !slices.Equal(tr.Generated, want) {
				t.Fatalf("max batch %d cell %d: generated train differs from the one-cell staggered rollout", mb, c)
			}
		}
		if last.Done != last.Total || last.Total != wantTotal {
			t.Errorf("max batch %d: final progress %+v, want done = total = %d", mb, last, wantTotal)
		}
	}
	res, err := Run(context.Background(), rec, &checkingPredictor{rec: rec, first: first, gen: map[int]map[int]bool{}}, Options{Split: rgc.Test, Cells: cells})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cells {
		if res.Trains[i].Start != first || !slices.Equal(res.Trains[i].Generated, naiveRollout(rec.Cells[c].ClusterID, first, to)) {
			t.Fatalf("unstaggered cell %d: start %d or train differs", c, res.Trains[i].Start)
		}
	}
}
