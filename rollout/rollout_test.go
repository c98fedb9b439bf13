package rollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"rgcpred/rgc"
)

// testRecording builds a recording of bins bins whose stimulus row c at bin b
// is a distinct value, with the given cells (cluster id 10+i, spike bins).
func testRecording(bins int, spikes ...[]int32) *rgc.Recording {
	rec := &rgc.Recording{Name: "handmade", SampleRateHz: rgc.SensorRateHz, Bins: bins}
	for c := range rec.Stimulus {
		rec.Stimulus[c] = make([]float32, bins)
		for b := range rec.Stimulus[c] {
			rec.Stimulus[c][b] = float32(c*bins+b) / float32(4*bins)
		}
	}
	for i, sb := range spikes {
		rec.Cells = append(rec.Cells, rgc.Cell{ClusterID: 10 + i, Quality: true, SpikeBins: sb})
	}
	return rec
}

// every returns spike bins at every period-th bin of [0, bins).
func every(bins, period, phase int) []int32 {
	var s []int32
	for b := phase; b < bins; b += period {
		s = append(s, int32(b))
	}
	return s
}

// constPredictor puts all probability on one class.
type constPredictor int

func (k constPredictor) Predict(b *rgc.Batch, out []float32) error {
	clear(out[:b.Len()*rgc.NumClasses])
	for i := 0; i < b.Len(); i++ {
		out[i*rgc.NumClasses+int(k)] = 1
	}
	return nil
}

// hashClass is a deterministic pseudo-random class for (cell, t), biased so
// that both spikes and no-spike steps occur.
func hashClass(cell, t int) int {
	h := uint64(cell)*0x9e3779b97f4a7c15 ^ uint64(t)*0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	if h%4 == 0 {
		return rgc.NoSpikeClass
	}
	return int(h % 40)
}

// checkingPredictor answers hashClass but spreads the mass over three
// classes so the median is what Median must find (mass 0.3 before k, 0.4 at
// k, 0.3 after), and checks every window: the stimulus rows are the
// recording's, the spike row is the recorded spikes up to the first window
// end and the spikes it itself implied after.
type checkingPredictor struct {
	rec   *rgc.Recording
	first int
	// starts, if not nil, overrides first per cluster id (staggered starts).
	starts map[int]int
	gen    map[int]map[int]bool // cluster id -> generated spike bins
	err    error
	calls  int
}

func (p *checkingPredictor) Predict(b *rgc.Batch, out []float32) error {
	p.calls++
	if err := b.Check(); err != nil {
		return err
	}
	for i := 0; i < b.Len(); i++ {
		id, t := b.Cells[i], b.Ends[i]
		ci, ok := p.rec.CellIndex(id)
		if !ok {
			return fmt.Errorf("unknown cell %d", id)
		}
		win := b.Inputs[i*rgc.WindowLen : (i+1)*rgc.WindowLen]
		for j := 0; j < rgc.WindowBins; j++ {
			bin := t - (rgc.WindowBins - 1) + j
			for c := 0; c < rgc.StimChannels; c++ {
				if win[c*rgc.WindowBins+j] != p.rec.Stimulus[c][bin] && p.err == nil {
					p.err = fmt.Errorf("cell %d t %d: stimulus row %d bin %d wrong", id, t, c, bin)
				}
			}
			var want float32
			first := p.first
			if s, ok := p.starts[id]; ok {
				first = s
			}
			if bin <= first {
				if _, found := slices.BinarySearch(p.rec.Cells[ci].SpikeBins, int32(bin)); found {
					want = 1
				}
			} else if p.gen[id][bin] {
				want = 1
			}
			if win[rgc.SpikeRow*rgc.WindowBins+j] != want && p.err == nil {
				p.err = fmt.Errorf("cell %d t %d: spike row bin %d is %v, want %v", id, t, bin, win[rgc.SpikeRow*rgc.WindowBins+j], want)
			}
		}
		k := hashClass(id, t)
		o := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(o)
		o[k] = 0.4
		if k > 0 {
			o[k-1] = 0.3
		} else {
			o[k] += 0.3
		}
		if k < rgc.NoSpikeClass {
			o[k+1] = 0.3
		} else {
			o[k] += 0.3
		}
		if k < rgc.NoSpikeClass {
			if p.gen[id] == nil {
				p.gen[id] = map[int]bool{}
			}
			p.gen[id][t+k+1] = true
		}
	}
	return nil
}

// naiveRollout is an independent one-cell rollout with hashClass: a plain
// train over [first+1, to), no ring buffer, no batching.
func naiveRollout(id, first, to int) []float64 {
	gen := make([]float64, to-first-1)
	naiveFill(gen, id, first, first, to)
	return gen
}

// naiveFill marks in gen (bins first+1..to-1) the spikes hashClass
// generates for cluster id from a first window ending at start.
func naiveFill(gen []float64, id, first, start, to int) {
	t := start
	for t < to-1 {
		k := hashClass(id, t)
		if k < rgc.Horizon {
			t += k + 1
			if t <= to-1 {
				gen[t-first-1] = 1
			}
		} else {
			t += rgc.Horizon
		}
	}
}

func TestRunConstant(t *testing.T) {
	const bins = 20000 // test split [18000, 20000), first window end 19023
	rec := testRecording(bins, every(bins, 7, 3), nil)
	first, from, to, err := Bins(rec, rgc.Test)
	if err != nil || first != 19023 || from != 19024 || to != 20000 {
		t.Fatalf("Bins = %d %d %d %v, want 19023 19024 20000", first, from, to, err)
	}
	for _, tc := range []struct {
		class  int
		spikes func(bin int) bool
		steps  int // predictions per cell
	}{
		// Class 9: a spike every 10 bins after the first window end.
		{9, func(b int) bool { return (b-first)%10 == 0 }, (to - 1 - first + 9) / 10},
		{0, func(b int) bool { return true }, to - 1 - first},
		// Class 80: no spike ever; steps of 80 bins.
		{rgc.NoSpikeClass, func(int) bool { return false }, (to - 1 - first + 79) / 80},
	} {
		res, err := Run(context.Background(), rec, constPredictor(tc.class), Options{Split: rgc.Test, Cells: []int{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		if res.From != from || res.To != to || len(res.Trains) != 2 {
			t.Fatalf("class %d: result covers [%d,%d) with %d trains", tc.class, res.From, res.To, len(res.Trains))
		}
		for ci, tr := range res.Trains {
			if tr.ClusterID != 10+ci || len(tr.Generated) != to-from || len(tr.Recorded) != to-from {
				t.Fatalf("class %d cell %d: id %d, %d/%d bins", tc.class, ci, tr.ClusterID, len(tr.Generated), len(tr.Recorded))
			}
			for b := from; b < to; b++ {
				want := 0.0
				if tc.spikes(b) {
					want = 1
				}
				if tr.Generated[b-from] != want {
					t.Fatalf("class %d cell %d bin %d: generated %v, want %v", tc.class, ci, b, tr.Generated[b-from], want)
				}
				wantRec := 0.0
				if ci == 0 && b%7 == 3 {
					wantRec = 1
				}
				if tr.Recorded[b-from] != wantRec {
					t.Fatalf("cell %d bin %d: recorded %v, want %v", ci, b, tr.Recorded[b-from], wantRec)
				}
			}
			if tr.Windows != tc.steps {
				t.Errorf("class %d cell %d: %d windows, want %d", tc.class, ci, tr.Windows, tc.steps)
			}
		}
	}
}

// TestRunFeedback checks every window the predictor sees (stimulus from the
// recording, spike row from the recorded first window then the generated
// train) and compares with an independent one-cell rollout, for several
// batch sizes: batching does not change the result.
func TestBatchingEquivalence(t *testing.T) {
	const bins = 30000
	rec := testRecording(bins, every(bins, 13, 0), every(bins, 50, 7), nil, every(bins, 3, 1))
	first, _, to, _ := Bins(rec, rgc.Test)
	cells := []int{3, 0, 1, 2}
	var ref *Result
	for _, mb := range []int{0, 1, 3, 4, 100} {
		p := &checkingPredictor{rec: rec, first: first, gen: map[int]map[int]bool{}}
		var last Progress
		res, err := Run(context.Background(), rec, p, Options{Split: rgc.Test, Cells: cells, MaxBatch: mb,
			Progress: func(pr Progress) { last = pr }})
		if err != nil {
			t.Fatal(err)
		}
		if p.err != nil {
			t.Fatalf("max batch %d: %v", mb, p.err)
		}
		if last.Done != last.Total || last.Total != len(cells)*(to-1-first) {
			t.Errorf("max batch %d: final progress %+v, want done = total = %d", mb, last, len(cells)*(to-1-first))
		}
		for i, tr := range res.Trains {
			want := naiveRollout(rec.Cells[cells[i]].ClusterID, first, to)
			if !slices.Equal(tr.Generated, want) {
				t.Fatalf("max batch %d cell %d: generated train differs from the one-cell rollout", mb, cells[i])
			}
			if last.Windows < tr.Windows {
				t.Fatalf("progress windows %d < cell windows %d", last.Windows, tr.Windows)
			}
		}
		if ref == nil {
			ref = res
			var spikes float64
			for _, v := range res.Trains[0].Generated {
				spikes += v
			}
			if spikes < 10 {
				t.Fatalf("hash predictor generated only %v spikes; test is too weak", spikes)
			}
			continue
		}
		for i := range res.Trains {
			if !slices.Equal(res.Trains[i].Generated, ref.Trains[i].Generated) || res.Trains[i].Windows != ref.Trains[i].Windows {
				t.Fatalf("max batch %d cell %d: differs from one batch per round", mb, cells[i])
			}
		}
		if mb == 1 && p.calls != last.Windows {
			t.Errorf("max batch 1: %d calls for %d windows", p.calls, last.Windows)
		}
	}
}

type failingPredictor struct{}

func (failingPredictor) Predict(*rgc.Batch, []float32) error { return errors.New("boom") }

func TestRunErrors(t *testing.T) {
	rec := testRecording(20000, every(20000, 7, 3))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, rec, constPredictor(9), Options{Split: rgc.Test, Cells: []int{0}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Run(context.Background(), rec, failingPredictor{}, Options{Split: rgc.Test, Cells: []int{0}}); err == nil {
		t.Error("failing predictor: no error")
	}
	if _, err := Run(context.Background(), rec, constPredictor(9), Options{Split: rgc.Test, Cells: []int{5}}); err == nil {
		t.Error("bad cell index: no error")
	}
	if _, err := Run(context.Background(), rec, constPredictor(9), Options{Split: rgc.Test}); err == nil {
		t.Error("no cells: no error")
	}
	short := testRecording(5000, nil) // test split of 500 bins
	if _, err := Run(context.Background(), short, constPredictor(9), Options{Split: rgc.Test, Cells: []int{0}}); err == nil {
		t.Error("split shorter than a window: no error")
	}
}

// TestHistory compares the ring buffer with a plain train over many steps,
// including jumps longer than a window.
func TestHistory(t *testing.T) {
	var c Cell
	recorded := []int32{100, 500, 1023, 1024, 1500}
	c.Reset(7, 1500, recorded)
	train := map[int]bool{}
	for _, b := range recorded {
		if b >= 1500-1023 {
			train[int(b)] = true
		}
	}
	row := make([]float32, rgc.WindowBins)
	check := func() {
		c.History.FillRow(row)
		for j := range row {
			bin := c.Next - (rgc.WindowBins - 1) + j
			want := float32(0)
			if train[bin] {
				want = 1
			}
			if row[j] != want {
				t.Fatalf("next %d bin %d: %v, want %v", c.Next, bin, row[j], want)
			}
		}
	}
	check()
	if !c.Due(1500) || c.Due(1499) || !c.Due(1600) {
		t.Errorf("Due wrong at next 1500")
	}
	for i, k := range []int{0, 5, 80, 79, 3, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80, 2, 0, 0, 17} {
		prev := c.Next
		bin, spike := c.Advance(k)
		wantBin, wantSpike := Step(prev, k)
		if bin != wantBin || spike != wantSpike || c.Next != bin || c.History.End() != bin {
			t.Fatalf("step %d: Advance(%d) = %d %v, want %d %v", i, k, bin, spike, wantBin, wantSpike)
		}
		if spike {
			train[bin] = true
		}
		check()
	}
	// A jump of more than a window clears everything.
	c.History.AdvanceTo(c.Next + 5000)
	c.Next += 5000
	check()
	if c.ID != 7 {
		t.Errorf("id %d", c.ID)
	}
}

func TestZeroInput(t *testing.T) {
	const bins = 20000 // train split [0, 14000)
	rec := testRecording(bins, every(bins, 10, 0), nil)
	first, last, n := rec.WindowRange(rgc.Train)
	// Cell 0 spikes at multiples of 10: the window ending at t has target
	// 9 - t mod 10. Cell 1 never spikes: always class 80.
	var n0 [rgc.NumClasses]int
	for t := first; t <= last; t++ {
		n0[9-t%10]++
	}
	z, err := NewZeroInput(rec, []int{0, 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	zp, err := NewZeroInput(rec, []int{0, 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	b := &rgc.Batch{Inputs: make([]float32, 3*rgc.WindowLen), Cells: []int{10, 11, 10}, Ends: []int{0, 1, 2}}
	out := make([]float32, 3*rgc.NumClasses)
	outP := make([]float32, 3*rgc.NumClasses)
	if err := z.Predict(b, out); err != nil {
		t.Fatal(err)
	}
	if err := zp.Predict(b, outP); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < rgc.NumClasses; k++ {
		want0 := float64(n0[k]+1) / float64(n+rgc.NumClasses)
		want1 := 1 / float64(n+rgc.NumClasses)
		if k == rgc.NoSpikeClass {
			want1 = float64(n+1) / float64(n+rgc.NumClasses)
		}
		wantP := float64(n0[k]+1) / float64(2*n+rgc.NumClasses)
		if k == rgc.NoSpikeClass {
			wantP = float64(n+1) / float64(2*n+rgc.NumClasses)
		}
		if !near(float64(out[k]), want0, 1e-6) || !near(float64(out[2*rgc.NumClasses+k]), want0, 1e-6) ||
			!near(float64(out[rgc.NumClasses+k]), want1, 1e-6) {
			t.Errorf("per cell, class %d: %v %v, want %v %v", k, out[k], out[rgc.NumClasses+k], want0, want1)
		}
		for i := 0; i < 3; i++ {
			if !near(float64(outP[i*rgc.NumClasses+k]), wantP, 1e-6) {
				t.Errorf("pooled, window %d class %d: %v, want %v", i, k, outP[i*rgc.NumClasses+k], wantP)
			}
		}
	}
	if n0[3] < 1000 || n0[rgc.NoSpikeClass] != 0 {
		t.Fatalf("unexpected hand counts %v", n0)
	}
	b.Cells[1] = 99
	if err := z.Predict(b, out); err == nil {
		t.Error("unknown cell: no error")
	}
	if _, err := NewZeroInput(rec, nil, false); err == nil {
		t.Error("no cells: no error")
	}
	if _, err := NewZeroInput(rec, []int{2}, false); err == nil {
		t.Error("bad cell index: no error")
	}

	// Its NLL on its own training split is the cross-entropy
	// -sum_k (n_k/N) ln p_k.
	var want float64
	for _, c := range n0 {
		if c > 0 {
			want -= float64(c) / float64(n) * math.Log(float64(c+1)/float64(n+rgc.NumClasses))
		}
	}
	nll, err := NLL(context.Background(), rec, z, Options{Split: rgc.Train, Cells: []int{0}, MaxBatch: 100}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !near(nll[0], want, 1e-6) {
		t.Errorf("zero-input NLL on train %v, want %v", nll[0], want)
	}
}

// TestNLLWindows: NLL visits every window of the split once with the
// recorded window and the right target, whatever the batch size and cell
// order; a stride takes every stride-th window end.
func TestNLLWindows(t *testing.T) {
	const bins = 14000 // test split [12600, 14000): 1400-1103 = 297 windows
	rec := testRecording(bins, every(bins, 37, 5), every(bins, 120, 11))
	first, last, n := rec.WindowRange(rgc.Test)
	// A predictor giving probability 0.5 to class (t mod 2)*40 and checking
	// the window: NLL per window is -ln 0.5 when the target is that class,
	// else -ln(0.5/80).
	p := predictorFunc(func(b *rgc.Batch, out []float32) error {
		win := make([]float32, rgc.WindowLen)
		for i := 0; i < b.Len(); i++ {
			ci, _ := rec.CellIndex(b.Cells[i])
			rec.Window(ci, b.Ends[i], win)
			if !slices.Equal(win, b.Inputs[i*rgc.WindowLen:(i+1)*rgc.WindowLen]) {
				return fmt.Errorf("cell %d t %d: window differs from rgc's", b.Cells[i], b.Ends[i])
			}
			o := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
			for k := range o {
				o[k] = 0.5 / 80
			}
			o[(b.Ends[i]%2)*40] = 0.5
		}
		return nil
	})
	for _, stride := range []int{1, 7} {
		var want [2]float64
		var cnt [2]int
		for ci := 0; ci < 2; ci++ {
			for t := first; t <= last; t += stride {
				if rgc.Target(rec.Cells[ci].SpikeBins, t) == (t%2)*40 {
					want[ci] -= math.Log(0.5)
				} else {
					want[ci] -= math.Log(0.5 / 80)
				}
				cnt[ci]++
			}
			want[ci] /= float64(cnt[ci])
		}
		if stride == 1 && cnt[0] != n {
			t.Fatalf("%d windows, want %d", cnt[0], n)
		}
		for _, mb := range []int{1, 5, 0} {
			var lastP Progress
			got, err := NLL(context.Background(), rec, p, Options{Split: rgc.Test, Cells: []int{1, 0}, MaxBatch: mb,
				Progress: func(pr Progress) { lastP = pr }}, stride)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got[0], want[1], 1e-5) || !near(got[1], want[0], 1e-5) {
				t.Errorf("stride %d max batch %d: %v, want %v %v", stride, mb, got, want[1], want[0])
			}
			if lastP.Done != 2*cnt[0] || lastP.Total != lastP.Done {
				t.Errorf("stride %d: progress %+v, want %d windows", stride, lastP, 2*cnt[0])
			}
		}
	}
	if _, err := NLL(context.Background(), rec, p, Options{Split: rgc.Test, Cells: []int{0}}, 0); err == nil {
		t.Error("stride 0: no error")
	}
}

type predictorFunc func(b *rgc.Batch, out []float32) error

func (f predictorFunc) Predict(b *rgc.Batch, out []float32) error { return f(b, out) }

// TestRunAllocs: the per-round work allocates nothing; only the per-cell
// trains of the result are allocated, so allocations do not grow with the
// length of the split.
func TestRunAllocs(t *testing.T) {
	short := testRecording(20000, every(20000, 7, 3), nil)
	long := testRecording(60000, every(60000, 7, 3), nil)
	opts := Options{Split: rgc.Test, Cells: []int{0, 1}}
	a := testing.AllocsPerRun(3, func() { _, _ = Run(context.Background(), short, constPredictor(9), opts) })
	b := testing.AllocsPerRun(3, func() { _, _ = Run(context.Background(), long, constPredictor(9), opts) })
	if a != b {
		t.Errorf("allocations grow with the split: %v for 2000 bins, %v for 6000", a, b)
	}
}
