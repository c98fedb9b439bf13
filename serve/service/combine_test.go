package service

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
)

// echoPredictor writes, for each window, a vector that depends on the
// window's cell and first input, so that a window's result shows whose it
// is. Cells above 1000 are unknown (an error). With gate set, every call
// first waits for a value on gate. It records each call's batch size.
type echoPredictor struct {
	gate    chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func (p *echoPredictor) Predict(b *rgc.Batch, out []float32) error {
	if p.entered != nil {
		p.entered <- struct{}{}
	}
	if p.gate != nil {
		<-p.gate
	}
	p.mu.Lock()
	p.sizes = append(p.sizes, b.Len())
	p.mu.Unlock()
	for i, c := range b.Cells {
		if c > 1000 {
			return fmt.Errorf("unknown cell %d", c)
		}
		for k := 0; k < rgc.NumClasses; k++ {
			out[i*rgc.NumClasses+k] = float32(c) + b.Inputs[i*rgc.WindowLen]/1000 + float32(k)/1e6
		}
	}
	return nil
}

// testBatch is a batch of the given cells whose first inputs are tag+i.
func testBatch(tag float32, cells ...int) (*rgc.Batch, []float32) {
	b := &rgc.Batch{Inputs: make([]float32, len(cells)*rgc.WindowLen), Cells: cells, Ends: make([]int, len(cells))}
	for i := range cells {
		b.Inputs[i*rgc.WindowLen] = tag + float32(i)
	}
	return b, make([]float32, len(cells)*rgc.NumClasses)
}

// checkEcho checks out against what echoPredictor computes for b alone.
func checkEcho(t *testing.T, who string, b *rgc.Batch, out []float32) {
	t.Helper()
	want := make([]float32, len(out))
	if err := (&echoPredictor{}).Predict(b, want); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("%s: output %d = %v, want %v (another caller's window?)", who, i, out[i], want[i])
		}
	}
}

// waitQueued waits until n calls wait in c.
func waitQueued(t *testing.T, c *combiner, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		k := len(c.wait)
		c.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls waiting, want %d", k, n)
		}
	}
}

// queueBehind runs first, which must hold p's gate, then each of waiting
// while it does, each queued behind it (waiting for the model), then
// opens the gate for every call and returns their errors, first's at 0.
func queueBehind(t *testing.T, c *combiner, p *echoPredictor, first func() error, waiting []func() error) []error {
	t.Helper()
	errs := make([]error, len(waiting)+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[0] = first() }()
	<-p.entered // the first call runs and holds the model
	for i, call := range waiting {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i+1] = call() }()
		waitQueued(t, c, i+1)
	}
	go func() {
		for range p.entered {
			p.gate <- struct{}{}
		}
	}()
	p.gate <- struct{}{}
	wg.Wait()
	close(p.entered)
	return errs
}

// TestCombinerMerges: calls that arrive while the model is busy run as one
// batch when it is free, each caller getting exactly its own windows'
// results; an error in the merged batch reaches only the call that caused
// it.
func TestCombinerMerges(t *testing.T) {
	cases := []struct {
		name      string
		waiting   [][]int // cells of the calls that queue behind the first
		wantSizes []int   // batch sizes the predictor sees after the first call
		wantErr   []bool
	}{
		{"two devices", [][]int{{1, 2}, {3}}, []int{3}, []bool{false, false}},
		{"three devices", [][]int{{4}, {5}, {6, 7, 8}}, []int{5}, []bool{false, false, false}},
		{"an unknown cell", [][]int{{1}, {2000}, {3}}, []int{3, 1, 1, 1}, []bool{false, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &echoPredictor{gate: make(chan struct{}), entered: make(chan struct{}, 16)}
			c := newCombiner(p)
			first, firstOut := testBatch(0, 9)
			batches := make([]*rgc.Batch, len(tc.waiting))
			outs := make([][]float32, len(tc.waiting))
			var calls []func() error
			for i, cells := range tc.waiting {
				batches[i], outs[i] = testBatch(float32(10*(i+1)), cells...)
				calls = append(calls, func() error { return c.Predict(batches[i], outs[i]) })
			}
			errs := queueBehind(t, c, p, func() error { return c.Predict(first, firstOut) }, calls)
			if errs[0] != nil {
				t.Fatalf("first call: %v", errs[0])
			}
			checkEcho(t, "first call", first, firstOut)
			for i := range tc.waiting {
				if gotErr := errs[i+1] != nil; gotErr != tc.wantErr[i] {
					t.Errorf("call %d: error %v, want error %v", i, errs[i+1], tc.wantErr[i])
				}
				if !tc.wantErr[i] {
					checkEcho(t, fmt.Sprintf("call %d", i), batches[i], outs[i])
				}
			}
			p.mu.Lock()
			got := p.sizes[1:]
			p.mu.Unlock()
			if fmt.Sprint(got) != fmt.Sprint(tc.wantSizes) {
				t.Errorf("batch sizes after the first call %v, want %v", got, tc.wantSizes)
			}
		})
	}
}

// TestCombinerConcurrent: many callers at once (run with -race) each get
// their own windows' results.
func TestCombinerConcurrent(t *testing.T) {
	c := newCombiner(&echoPredictor{})
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				b, out := testBatch(float32(g*1000+i), g+1, 100+g)
				if err := c.Predict(b, out); err != nil {
					t.Error(err)
					return
				}
				checkEcho(t, fmt.Sprintf("caller %d call %d", g, i), b, out)
			}
		}()
	}
	wg.Wait()
}

// TestCombinerSwap: swap returns only once the batch running on the old
// predictor has finished, and later calls run on the new one.
func TestCombinerSwap(t *testing.T) {
	old := &echoPredictor{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	c := newCombiner(old)
	b, out := testBatch(0, 1)
	done := make(chan error, 1)
	go func() { done <- c.Predict(b, out) }()
	<-old.entered
	swapped := make(chan struct{})
	next := &echoPredictor{}
	go func() {
		if err := c.swap(next); err != nil {
			t.Error(err)
		}
		close(swapped)
	}()
	select {
	case <-swapped:
		t.Fatal("swap returned while a batch ran on the old predictor")
	case <-time.After(50 * time.Millisecond):
	}
	old.gate <- struct{}{}
	<-swapped
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.Predict(b, out); err != nil {
		t.Fatal(err)
	}
	if len(next.sizes) != 1 || len(old.sizes) != 1 {
		t.Errorf("calls: old predictor %d, new %d, want 1 and 1", len(old.sizes), len(next.sizes))
	}
	if c.swap(nil) == nil {
		t.Error("swap(nil) accepted")
	}
}

// TestCombinerAllocs: a lone caller's call allocates nothing (the daemon's
// hot path).
func TestCombinerAllocs(t *testing.T) {
	c := newCombiner(nopPredictor{})
	b, out := testBatch(0, 1, 2)
	if n := testing.AllocsPerRun(200, func() {
		if err := c.Predict(b, out); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}

// nopPredictor returns at once.
type nopPredictor struct{}

func (nopPredictor) Predict(*rgc.Batch, []float32) error { return nil }

// expectingPredictor records the calls announced to it (rgc.Expecter).
type expectingPredictor struct {
	nopPredictor
	got []int
}

func (p *expectingPredictor) Expect(n int, d time.Duration) { p.got = append(p.got, n) }

// TestCombinerExpect: the combiner passes announcements on to the predictor
// that serves now (after a swap, the new one), and drops them for a
// predictor that cannot prepare.
func TestCombinerExpect(t *testing.T) {
	first, second := &expectingPredictor{}, &expectingPredictor{}
	c := newCombiner(first)
	c.Expect(2, time.Millisecond)
	if err := c.swap(second); err != nil {
		t.Fatal(err)
	}
	c.Expect(3, time.Millisecond)
	if err := c.swap(nopPredictor{}); err != nil {
		t.Fatal(err)
	}
	c.Expect(4, time.Millisecond) // nopPredictor cannot prepare: dropped
	if fmt.Sprint(first.got, second.got) != "[2] [3]" {
		t.Fatalf("announcements heard: first %v, second %v; want [2] and [3]", first.got, second.got)
	}
	if n := testing.AllocsPerRun(100, func() { c.Expect(2, time.Millisecond) }); n != 0 {
		t.Errorf("%v allocations per Expect, want 0", n)
	}
	off := &expectingPredictor{}
	c = newCombiner(off)
	c.noExpect = true // Config.NoExpect
	c.Expect(2, time.Millisecond)
	if len(off.got) != 0 {
		t.Fatalf("announcements off, yet the predictor heard %v", off.got)
	}
}

// handRecorder records the reports of a PredictEach call, checking that
// the windows reported are final.
type handRecorder struct {
	t       *testing.T
	b       *rgc.Batch
	out     []float32
	reports []int
}

func (r *handRecorder) done(n int) {
	want := make([]float32, len(r.out))
	if err := (&echoPredictor{}).Predict(r.b, want); err != nil {
		r.t.Error(err)
	}
	for i := range n * rgc.NumClasses {
		if r.out[i] != want[i] {
			r.t.Errorf("report %d: output %d is %v, want %v", n, i, r.out[i], want[i])
			return
		}
	}
	r.reports = append(r.reports, n)
}

// TestCombinerHandsOver: a caller's windows reach its done as the
// predictor hands them over, alone and as the caller that runs a merged
// batch (its windows first); a caller merged into another's batch gets
// its windows, final, when its call returns.
func TestCombinerHandsOver(t *testing.T) {
	ep := &echoPredictor{gate: make(chan struct{}), entered: make(chan struct{}, 16)}
	p := &fakepred.Handing{P: ep, Last: true}
	c := newCombiner(p)
	first, firstOut := testBatch(0, 9, 8, 7)
	r0 := &handRecorder{t: t, b: first, out: firstOut}
	var rs [2]*handRecorder
	var calls []func() error
	for i, cells := range [][]int{{1, 2}, {3, 4, 5}} {
		b, out := testBatch(float32(10*(i+1)), cells...)
		rs[i] = &handRecorder{t: t, b: b, out: out}
		calls = append(calls, func() error { return c.PredictEach(b, out, rs[i].done) })
	}
	// The first call runs alone and holds the model; the others merge.
	errs := queueBehind(t, c, ep, func() error { return c.PredictEach(first, firstOut, r0.done) }, calls)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if fmt.Sprint(r0.reports) != "[1 2 3]" {
		t.Errorf("the call run alone: reports %v, want [1 2 3]", r0.reports)
	}
	runners := 0
	for i, r := range rs {
		checkEcho(t, fmt.Sprintf("merged call %d", i), r.b, r.out)
		switch want := r.b.Len(); {
		case len(r.reports) == 0:
		case len(r.reports) == want && r.reports[want-1] == want:
			runners++
		default:
			t.Errorf("merged call %d: reports %v, want none or 1..%d", i, r.reports, want)
		}
	}
	if runners != 1 {
		t.Errorf("%d merged calls had their windows handed over, want the one that ran the batch", runners)
	}
	ep.mu.Lock()
	sizes := fmt.Sprint(ep.sizes)
	ep.mu.Unlock()
	if sizes != "[3 5]" {
		t.Errorf("batch sizes %v, want [3 5]", sizes)
	}

	single, out := testBatch(0, 1, 2)
	reports := 0
	done := func(int) { reports++ }
	q := newCombiner(&fakepred.Handing{P: &echoPredictor{}, Last: true})
	if n := testing.AllocsPerRun(100, func() {
		if err := q.PredictEach(single, out, done); err != nil {
			t.Fatal(err)
		}
	}); n != 0 || reports == 0 {
		t.Errorf("%v allocations per handed-over call (%d reports), want 0", n, reports)
	}
}
