package rgc

import (
	"math"
	"testing"
)

// handRecording builds a recording of bins bins with a ramp stimulus
// (Stimulus[c][b] = c*1e6 + b, so every value identifies its bin) and the
// given spike trains.
func handRecording(bins int, trains ...[]int32) *Recording {
	r := &Recording{Name: "hand", SampleRateHz: SensorRateHz, Bins: bins}
	for c := range r.Stimulus {
		r.Stimulus[c] = make([]float32, bins)
		for b := range r.Stimulus[c] {
			r.Stimulus[c][b] = float32(c*1_000_000 + b)
		}
	}
	for i, tr := range trains {
		r.Cells = append(r.Cells, Cell{ClusterID: 100 + i, Quality: i%2 == 0, SpikeBins: tr})
	}
	return r
}

func TestTarget(t *testing.T) {
	const t0 = 5000
	cases := []struct {
		name   string
		spikes []int32
		want   int
	}{
		{"no spike at all", nil, NoSpikeClass},
		{"spike in the last bin of the window only", []int32{t0}, NoSpikeClass},
		{"spike in the next bin", []int32{t0 + 1}, 0},
		{"spike exactly 80 bins later", []int32{t0 + 80}, 79},
		{"spike 81 bins later", []int32{t0 + 81}, NoSpikeClass},
		{"two spikes in one bin", []int32{t0 + 5, t0 + 5}, 4},
		{"earlier spikes ignored", []int32{10, t0 - 1, t0, t0 + 30, t0 + 31}, 29},
		{"spikes only before", []int32{1, 2, t0 - 1}, NoSpikeClass},
		{"two in the last bin, one later", []int32{t0, t0, t0 + 2}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Target(tc.spikes, t0); got != tc.want {
				t.Fatalf("Target(%v, %d) = %d, want %d", tc.spikes, t0, got, tc.want)
			}
		})
	}
}

func TestFillSpikeRow(t *testing.T) {
	const t0 = 3000
	start := t0 - (WindowBins - 1)
	cases := []struct {
		name   string
		spikes []int32
		ones   []int // window positions that must be 1; all others 0
	}{
		{"no spike at all", nil, nil},
		{"spike in the last bin", []int32{t0}, []int{WindowBins - 1}},
		{"spike in the first bin", []int32{int32(start)}, []int{0}},
		{"spike just before the window", []int32{int32(start - 1)}, nil},
		{"spike just after the window", []int32{t0 + 1}, nil},
		{"two spikes in one bin clamp to 1", []int32{t0 - 10, t0 - 10}, []int{WindowBins - 11}},
		{"several", []int32{5, int32(start), t0 - 500, t0 - 500, t0, t0 + 80}, []int{0, WindowBins - 501, WindowBins - 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]float32, WindowBins)
			for _, p := range tc.ones {
				want[p] = 1
			}
			// As a whole window: only row SpikeRow is written.
			win := make([]float32, WindowLen)
			for i := range win {
				win[i] = -7
			}
			FillSpikeRow(win, tc.spikes, t0)
			for i := 0; i < SpikeRow*WindowBins; i++ {
				if win[i] != -7 {
					t.Fatalf("stimulus element %d overwritten", i)
				}
			}
			// As one row.
			row := make([]float32, WindowBins)
			for i := range row {
				row[i] = 9
			}
			FillSpikeRow(row, tc.spikes, t0)
			for j := 0; j < WindowBins; j++ {
				if win[SpikeRow*WindowBins+j] != want[j] || row[j] != want[j] {
					t.Fatalf("position %d: window %g, row %g, want %g", j, win[SpikeRow*WindowBins+j], row[j], want[j])
				}
			}
		})
	}
}

func TestStimulusWindow(t *testing.T) {
	r := handRecording(3000)
	dst := make([]float32, WindowLen)
	for _, t0 := range []int{1023, 2999, 1500, 10, 3100} {
		for i := range dst {
			dst[i] = -1
		}
		r.StimulusWindow(t0, dst)
		for c := 0; c < StimChannels; c++ {
			for j := 0; j < WindowBins; j++ {
				b := t0 - (WindowBins - 1) + j
				want := float32(0)
				if b >= 0 && b < r.Bins {
					want = float32(c*1_000_000 + b)
				}
				if got := dst[c*WindowBins+j]; got != want {
					t.Fatalf("t=%d channel %d position %d: %g, want %g", t0, c, j, got, want)
				}
			}
		}
		for j := SpikeRow * WindowBins; j < WindowLen; j++ {
			if dst[j] != -1 {
				t.Fatalf("t=%d: spike row touched", t0)
			}
		}
	}
}

func TestWindowAndBatch(t *testing.T) {
	r := handRecording(5000, []int32{1100, 1100, 1200, 1290}, nil)
	dst := make([]float32, WindowLen)
	// The next spike after 1200 is at 1290, 90 bins later: no spike class.
	if got := r.Window(0, 1200, dst); got != NoSpikeClass {
		t.Fatalf("target %d, want %d", got, NoSpikeClass)
	}
	if got := r.Window(0, 1210, dst); got != 79 {
		t.Fatalf("target %d, want 79 (spike at t+80)", got)
	}
	if dst[SpikeRow*WindowBins+WindowBins-1-110] != 1 || dst[SpikeRow*WindowBins+WindowBins-1-10] != 1 {
		t.Fatal("spike row misses spikes at 1100 and 1200")
	}
	if dst[WindowBins-1] != 1210 || dst[3*WindowBins+WindowBins-1] != 3_001_210 {
		t.Fatal("stimulus rows wrong")
	}
	refs := []WindowRef{{0, 1210}, {1, 2000}, {0, 1099}}
	var b Batch
	targets := make([]int, len(refs))
	r.FillBatch(refs, &b, targets)
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	wantTargets := []int{79, NoSpikeClass, 0}
	for i, ref := range refs {
		if targets[i] != wantTargets[i] || b.Cells[i] != 100+ref.Cell || b.Ends[i] != ref.T {
			t.Errorf("window %d: target %d cell %d end %d", i, targets[i], b.Cells[i], b.Ends[i])
		}
		want := make([]float32, WindowLen)
		r.Window(ref.Cell, ref.T, want)
		for j := range want {
			if b.Inputs[i*WindowLen+j] != want[j] {
				t.Fatalf("window %d element %d differs from Window", i, j)
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		r.FillBatch(refs, &b, targets)
		r.Window(0, 1500, dst)
	})
	if allocs != 0 {
		t.Errorf("FillBatch + Window allocate %.1f times per call after warm-up", allocs)
	}
}

func TestSplits(t *testing.T) {
	r := handRecording(20000)
	want := map[Split][2]int{Train: {0, 14000}, Val: {14000, 18000}, Test: {18000, 20000}}
	for s, w := range want {
		from, to := r.SplitRange(s)
		if from != w[0] || to != w[1] {
			t.Errorf("%v: [%d, %d), want %v", s, from, to, w)
		}
		p, err := ParseSplit(s.String())
		if err != nil || p != s {
			t.Errorf("ParseSplit(%q) = %v, %v", s.String(), p, err)
		}
	}
	if _, err := ParseSplit("validation"); err == nil {
		t.Error("ParseSplit accepted an unknown name")
	}
	// Window ends: first = from + 1023, last = to - 81 (target bins t+1..t+80 < to).
	cases := []struct {
		s           Split
		first, last int
	}{
		{Train, 1023, 13919},
		{Val, 15023, 17919},
		{Test, 19023, 19919},
	}
	for _, tc := range cases {
		first, last, n := r.WindowRange(tc.s)
		if first != tc.first || last != tc.last || n != last-first+1 {
			t.Errorf("%v: window ends %d..%d (n %d), want %d..%d", tc.s, first, last, n, tc.first, tc.last)
		}
		from, to := r.SplitRange(tc.s)
		ws := r.Windows(tc.s, []int{1, 0})
		if len(ws) != 2*n || r.NumWindows(tc.s, []int{1, 0}) != 2*n {
			t.Fatalf("%v: %d windows, want %d", tc.s, len(ws), 2*n)
		}
		for i, w := range ws {
			if w.T-(WindowBins-1) < from || w.T+Horizon >= to {
				t.Fatalf("%v: window %v straddles [%d, %d)", tc.s, w, from, to)
			}
			wantCell := 1
			if i >= n {
				wantCell = 0
			}
			if w.Cell != wantCell || w.T != tc.first+i%n {
				t.Fatalf("%v: window %d is %v, out of order", tc.s, i, w)
			}
		}
	}
	// A split too short for one window has none.
	short := handRecording(1500, []int32{5})
	if n := short.NumWindows(Test, []int{0}); n != 0 || len(short.Windows(Test, []int{0})) != 0 {
		t.Errorf("short recording: %d test windows, want 0", n)
	}
	if s := NewSampler(short, Test, []int{0}, 1); s.Len() != 0 || s.Next() != (WindowRef{-1, -1}) {
		t.Error("sampler over no windows")
	}
}

func TestSampler(t *testing.T) {
	r := handRecording(3000, nil, nil, nil)
	cells := []int{0, 2}
	first, last, n := r.WindowRange(Train)
	a := NewSampler(r, Train, cells, 42)
	b := NewSampler(r, Train, cells, 42)
	c := NewSampler(r, Train, cells, 43)
	if a.Len() != 2*n {
		t.Fatalf("Len %d, want %d", a.Len(), 2*n)
	}
	same := 0
	const draws = 200000
	perCell := map[int]int{}
	seen := map[WindowRef]bool{}
	sumT := 0.0
	for i := 0; i < draws; i++ {
		x, y, z := a.Next(), b.Next(), c.Next()
		if x != y {
			t.Fatalf("draw %d: same seed gives %v and %v", i, x, y)
		}
		if x == z {
			same++
		}
		if x.T < first || x.T > last || (x.Cell != 0 && x.Cell != 2) {
			t.Fatalf("draw %v outside the valid windows", x)
		}
		perCell[x.Cell]++
		seen[x] = true
		sumT += float64(x.T)
	}
	if same > draws/100 {
		t.Errorf("seeds 42 and 43 agree on %d of %d draws", same, draws)
	}
	// Uniform: each cell ~half the draws (binomial sd ~ 0.0011), every
	// window drawn (expected ~100 draws each), mean t at the centre.
	if f := float64(perCell[0]) / draws; math.Abs(f-0.5) > 0.01 {
		t.Errorf("cell 0 drawn %.4f of the time, want 0.5 +- 0.01", f)
	}
	if len(seen) != 2*n {
		t.Errorf("%d distinct windows drawn, want all %d", len(seen), 2*n)
	}
	if m, want := sumT/draws, float64(first+last)/2; math.Abs(m-want) > 3 {
		t.Errorf("mean t %.1f, want %.1f +- 3", m, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { a.Next() }); allocs != 0 {
		t.Errorf("Next allocates %.1f", allocs)
	}
}

func TestCellHelpers(t *testing.T) {
	r := handRecording(2000, []int32{3, 3, 10}, nil, []int32{1999})
	if i, ok := r.CellIndex(102); !ok || i != 2 {
		t.Errorf("CellIndex(102) = %d, %v", i, ok)
	}
	if _, ok := r.CellIndex(7); ok {
		t.Error("CellIndex(7) found")
	}
	if got := r.QualityClusterIDs(); len(got) != 2 || got[0] != 100 || got[1] != 102 {
		t.Errorf("QualityClusterIDs %v", got)
	}
	if got := r.ClusterIDs(); len(got) != 3 || got[1] != 101 {
		t.Errorf("ClusterIDs %v", got)
	}
	if idx, err := r.CellIndices([]int{102, 100}); err != nil || idx[0] != 2 || idx[1] != 0 {
		t.Errorf("CellIndices = %v, %v", idx, err)
	}
	if _, err := r.CellIndices([]int{5}); err == nil {
		t.Error("CellIndices of unknown id succeeded")
	}
	counts := r.Cells[0].Counts(2, 12)
	want := []float64{0, 2, 0, 0, 0, 0, 0, 0, 1, 0}
	for i := range want {
		if counts[i] != want[i] {
			t.Fatalf("Counts = %v, want %v", counts, want)
		}
	}
	if got, want := r.Cells[0].RateHz(2000), 3/(2000/BinRateHz); math.Abs(got-want) > 1e-9 {
		t.Errorf("RateHz %g, want %g", got, want)
	}
	if got := r.RateHz(0); math.Abs(got-3/(2000/BinRateHz)) > 1e-9 {
		t.Errorf("Recording.RateHz %g", got)
	}
}

func BenchmarkLoadAndIndex(b *testing.B) {
	for i := 0; i < b.N; i++ {
		rec, err := Load(shippedDir)
		if err != nil {
			b.Fatal(err)
		}
		cells := rec.QualityCells()
		s := NewSampler(rec, Train, cells, 1)
		if s.Len() != rec.NumWindows(Train, cells) || s.Len() == 0 {
			b.Fatal("no windows")
		}
		n := 0
		for range rec.AllWindows(Train, cells) {
			n++
		}
		if n != s.Len() {
			b.Fatalf("iterated %d windows, want %d", n, s.Len())
		}
	}
}

func BenchmarkLoadRaw(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := LoadRaw(shippedDir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFillBatch64(b *testing.B) {
	rec, err := Load(shippedDir)
	if err != nil {
		b.Fatal(err)
	}
	s := NewSampler(rec, Train, rec.QualityCells(), 1)
	refs := make([]WindowRef, 64)
	var batch Batch
	targets := make([]int, len(refs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range refs {
			refs[j] = s.Next()
		}
		rec.FillBatch(refs, &batch, targets)
	}
}

func BenchmarkLoad(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Load(shippedDir); err != nil {
			b.Fatal(err)
		}
	}
}
