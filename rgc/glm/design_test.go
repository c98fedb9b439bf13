package glm

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rgcpred/rgc"
)

func TestBasis(t *testing.T) {
	tests := []struct {
		name                string
		n, start            int
		first, last, offset float64
		wantLen             int
	}{
		// Default stimulus basis: peaks 36..246 bins back.
		{"stimulus", 9, 36, 0, 210, 10, 503},
		// Default history basis: peaks at lags 1..121.
		{"history", 10, 1, 0, 120, 1, 352},
		{"linear-ish", 5, 0, 5, 50, 1000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBasis(tc.n, tc.start, tc.first, tc.last, tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLen > 0 && b.Len != tc.wantLen {
				t.Errorf("length %d, want %d", b.Len, tc.wantLen)
			}
			if len(b.Rows) != tc.n {
				t.Fatalf("%d rows, want %d", len(b.Rows), tc.n)
			}
			for i, row := range b.Rows {
				if len(row) != b.Len {
					t.Fatalf("row %d has %d lags, want %d", i, len(row), b.Len)
				}
				for j, v := range row {
					if j < tc.start && v != 0 {
						t.Fatalf("row %d lag %d = %g before the start lag %d", i, j, v, tc.start)
					}
					if v < 0 || v > 1 {
						t.Fatalf("row %d lag %d = %g outside [0, 1]", i, j, v)
					}
				}
				if row[b.Len-1] > 1e-3 {
					t.Errorf("row %d does not reach 0 by the last lag: %g", i, row[b.Len-1])
				}
			}
			// Peaks are a quarter of a bump's width apart: the bumps sum to
			// 2 between the peaks of the second and the last but one.
			y0, y1 := math.Log(tc.first+tc.offset), math.Log(tc.last+tc.offset)
			dy := (y1 - y0) / float64(tc.n-1)
			lo := tc.start + int(math.Ceil(math.Exp(y0+dy)-tc.offset))
			hi := tc.start + int(math.Floor(math.Exp(y1-dy)-tc.offset))
			if hi-lo < 10 {
				t.Fatalf("interior %d..%d too short to test", lo, hi)
			}
			for j := lo; j <= hi; j++ {
				s := 0.0
				for _, row := range b.Rows {
					s += row[j]
				}
				if math.Abs(s-2) > 1e-9 {
					t.Fatalf("bumps sum to %g at lag %d, want 2", s, j)
				}
			}
		})
	}
	for _, bad := range []struct {
		n, start            int
		first, last, offset float64
		want                string
	}{
		{0, 0, 0, 10, 1, "0 bumps"},
		{3, -1, 0, 10, 1, "negative"},
		{3, 0, 10, 10, 1, "want 0 <= first < last"},
		{3, 0, 0, 10, 0, "offset"},
	} {
		if _, err := NewBasis(bad.n, bad.start, bad.first, bad.last, bad.offset); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewBasis(%d, %d, %g, %g, %g): err = %v, want %q", bad.n, bad.start, bad.first, bad.last, bad.offset, err, bad.want)
		}
	}
}

// TestStimDesign compares the shared stimulus columns with a direct
// convolution of the basis with the LED states, and the drive of the filter
// Basis.Filter builds (what the oracle evaluates) with the columns' weighted
// sum (what the fit optimises).
func TestStimDesign(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	f := &Frames{Start: []int{7}}
	for f.End() < 900 {
		f.Start = append(f.Start, f.End()+3+r.IntN(40))
		f.Pattern = append(f.Pattern, uint8(r.IntN(16)))
	}
	n := f.End() + 50 // bins past the last frame read the mean level
	b, err := NewBasis(4, 5, 0, 60, 3)
	if err != nil {
		t.Fatal(err)
	}
	state := func(c, v int) float64 {
		if v < f.Start[0] || v >= f.End() {
			return 0
		}
		if f.Pattern[f.frameAt(v)]>>c&1 == 1 {
			return 0.5
		}
		return -0.5
	}
	for _, workers := range []int{1, 3} {
		got := stimDesign(f, b, n, workers)
		nb := len(b.Rows)
		cols := rgc.StimChannels * nb
		w := make([]float64, cols)
		for k := range w {
			w[k] = r.NormFloat64()
		}
		var filt [rgc.StimChannels][]float64
		for c := range filt {
			filt[c] = b.Filter(w[c*nb : (c+1)*nb])
		}
		for u := 0; u < n; u++ {
			drive, fromCols := 0.0, 0.0
			for c := 0; c < rgc.StimChannels; c++ {
				for i, row := range b.Rows {
					want := 0.0
					for j, v := range row {
						want += v * state(c, u-j)
					}
					g := float64(got[u*cols+c*nb+i])
					if math.Abs(g-want) > 1e-5*(1+math.Abs(want)) {
						t.Fatalf("workers %d bin %d LED %d bump %d: %g, want %g", workers, u, c, i, g, want)
					}
					fromCols += w[c*nb+i] * g
				}
				for j, v := range filt[c] {
					drive += v * state(c, u-j)
				}
			}
			if math.Abs(drive-fromCols) > 1e-4*(1+math.Abs(drive)) {
				t.Fatalf("bin %d: filter drive %g, weighted columns %g", u, drive, fromCols)
			}
		}
	}
}

func TestHistDesign(t *testing.T) {
	h, err := NewBasis(3, 1, 0, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]bool, 60)
	for _, s := range []int{2, 3, 20, 59} {
		y[s] = true
	}
	got := make([]float32, len(y)*3)
	histDesign(y, h, got)
	for u := range y {
		for i, row := range h.Rows {
			want := 0.0
			for j := 1; j < h.Len && j <= u; j++ {
				if y[u-j] {
					want += row[j]
				}
			}
			if g := float64(got[u*3+i]); math.Abs(g-want) > 1e-6 {
				t.Fatalf("bin %d bump %d: %g, want %g", u, i, g, want)
			}
		}
	}
}

func TestAlignFrames(t *testing.T) {
	raw, err := rgc.LoadRaw("../../data/chicken-17-08-21")
	if err != nil {
		t.Fatal(err)
	}
	f, err := AlignFrames(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range raw.Triggers {
		if d := s - int64(f.Start[i])*rgc.Decimation; d < -rgc.Decimation/2 || d > rgc.Decimation/2 {
			t.Fatalf("trigger %d at sample %d aligned to bin %d (%d samples away)", i, s, f.Start[i], d)
		}
	}
	lens, probs := f.FrameLengths()
	sum := 0.0
	for _, p := range probs {
		sum += p
	}
	// The real frames last 802-1488 samples: 44.6-82.7 bins.
	if lens[0] < 44 || lens[len(lens)-1] > 84 || math.Abs(sum-1) > 1e-12 {
		t.Errorf("aligned frame lengths %d..%d bins, probabilities sum to %g", lens[0], lens[len(lens)-1], sum)
	}
	al, err := AlignedRaw(raw, []int{raw.Cells[5].ClusterID, raw.Cells[2].ClusterID})
	if err != nil {
		t.Fatal(err)
	}
	if len(al.Cells) != 2 || al.Cells[0].ClusterID != raw.Cells[5].ClusterID || al.Cells[1].ClusterID != raw.Cells[2].ClusterID {
		t.Errorf("aligned raw holds cells %v", al.Cells)
	}
	for i, s := range al.Triggers {
		if s != int64(f.Start[i])*rgc.Decimation {
			t.Fatalf("aligned trigger %d at sample %d, want %d", i, s, f.Start[i]*rgc.Decimation)
		}
	}
	if _, err := AlignedRaw(raw, []int{-7}); err == nil || !strings.Contains(err.Error(), "cluster id -7") {
		t.Errorf("unknown cluster: err = %v", err)
	}
	// A synthetic recording's triggers are already on bin boundaries.
	sc := loadSynth(t)
	sf, err := AlignFrames(sc.raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sc.raw.Triggers {
		if int64(sf.Start[i])*rgc.Decimation != s {
			t.Fatalf("synthetic trigger %d moved from sample %d to bin %d", i, s, sf.Start[i])
		}
	}
}
