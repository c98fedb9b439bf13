package rollout

import (
	"slices"
	"strings"
	"testing"

	"rgcpred/rgc"
)

func TestStartOffsetsByID(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cells, all []int
		stagger    bool
		want       []int
		err        string
	}{
		{"rank among the cells", []int{9, 2, 5, 7}, nil, true, []int{60, 0, 20, 40}, ""},
		{"index in the whole list", []int{42, 7}, []int{3, 7, 19, 42}, true, []int{60, 20}, ""},
		{"no stagger", []int{42, 7}, []int{3, 7, 19, 42}, false, []int{0, 0}, ""},
		{"one cell", []int{5}, nil, true, []int{0}, ""},
		{"whole list not ascending", []int{7}, []int{7, 3}, true, nil, "not strictly ascending"},
		{"whole list repeats a cell", []int{7}, []int{3, 7, 7}, false, nil, "not strictly ascending"},
		{"cells repeat", []int{7, 7}, nil, true, nil, "not strictly ascending"},
		{"cell outside the whole list", []int{8}, []int{3, 7}, false, nil, "cell 8 is not in the whole cell list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StartOffsetsByID(tc.cells, tc.all, tc.stagger)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("offsets %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestMissingCells(t *testing.T) {
	for _, tc := range []struct {
		name        string
		known, want []int
		missing     []int
	}{
		{"all known", []int{1, 2, 3}, []int{3, 1}, nil},
		{"in the order asked", []int{1, 2}, []int{5, 2, 4}, []int{5, 4}},
		{"nothing known", nil, []int{1}, []int{1}},
		{"nothing asked", []int{1}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MissingCells(tc.known, tc.want); !slices.Equal(got, tc.missing) {
				t.Errorf("MissingCells(%v, %v) = %v, want %v", tc.known, tc.want, got, tc.missing)
			}
		})
	}
}

// TestHistoryRules checks that the three forms of a cell's initial history
// agree with the spike row of the recorded window (rgc.FillSpikeRow): the
// offline rollout's Reset, the wire row of HistoryRow and the daemon's
// ResetRow; and that HistoryBins yields each recorded bin once.
func TestHistoryRules(t *testing.T) {
	const t0 = 3000
	lo := t0 - (rgc.WindowBins - 1)
	for _, tc := range []struct {
		name   string
		spikes []int32
		bins   []int // HistoryBins(spikes, lo, t0)
	}{
		{"none", nil, nil},
		{"inside, repeated", []int32{int32(lo), int32(lo), 2500, 2999, t0}, []int{lo, 2500, 2999, t0}},
		{"outside both ends", []int32{int32(lo - 1), 2600, t0 + 1}, []int{2600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for b := range HistoryBins(tc.spikes, lo, t0) {
				got = append(got, b)
			}
			if !slices.Equal(got, tc.bins) {
				t.Errorf("HistoryBins = %v, want %v", got, tc.bins)
			}
			want := make([]float32, rgc.WindowBins)
			rgc.FillSpikeRow(want, tc.spikes, t0)
			var row [rgc.WindowBins]bool
			HistoryRow(&row, tc.spikes, t0)
			var a, b Cell
			a.Reset(1, t0, tc.spikes)
			b.ResetRow(1, t0, &row)
			ra, rb := make([]float32, rgc.WindowBins), make([]float32, rgc.WindowBins)
			a.History.FillRow(ra)
			b.History.FillRow(rb)
			for j := range want {
				if (want[j] != 0) != row[j] || ra[j] != want[j] || rb[j] != want[j] {
					t.Fatalf("bin %d: window %v, HistoryRow %v, Reset %v, ResetRow %v", lo+j, want[j], row[j], ra[j], rb[j])
				}
			}
			if a.Next != t0 || b.Next != t0 || a.ID != 1 || b.ID != 1 {
				t.Errorf("cells start at %d and %d (ids %d, %d), want %d", a.Next, b.Next, a.ID, b.ID, t0)
			}
		})
	}
}
