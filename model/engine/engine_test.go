package engine

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"rgcpred/model"
	"rgcpred/rgc"
)

// randomWeights returns model.ParityWeights for configuration name: every
// layer matters for the output, so the tests are not blind to any.
func randomWeights(t testing.TB, name string, cells int, seed uint64) *model.Weights {
	t.Helper()
	cfg, err := model.ParseConfigName(name, cells)
	if err != nil {
		t.Fatal(err)
	}
	return model.ParityWeights(cfg, seed)
}

// randomBatch returns n windows: stimulus rows uniform in [0,1], spike row
// Bernoulli(0.05), cells drawn from ids.
func randomBatch(n int, ids []int, seed uint64) *rgc.Batch {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := &rgc.Batch{Inputs: make([]float32, n*rgc.WindowLen), Cells: make([]int, n), Ends: make([]int, n)}
	for i := 0; i < n; i++ {
		win := b.Inputs[i*rgc.WindowLen : (i+1)*rgc.WindowLen]
		for j := range win {
			if j/rgc.WindowBins == rgc.SpikeRow {
				if rng.Float64() < 0.05 {
					win[j] = 1
				}
			} else {
				win[j] = float32(rng.Float64())
			}
		}
		b.Cells[i] = ids[rng.IntN(len(ids))]
		b.Ends[i] = 1023 + i
	}
	return b
}

var cellIDs = []int{12, 40, 7}

// TestEngineThreadsAndChunksAgree: the split across threads and chunks must
// not change any output bit, whether windows run whole (one per thread) or
// split layer by layer across the threads (the rows of every GEMM are the
// same sums in the same order whichever thread computes them), for the
// paper CNN and the CPU preset, with and without a projection, and with
// waits that park at once (spin 0) as well as spinning ones.
func TestEngineThreadsAndChunksAgree(t *testing.T) {
	type setting struct {
		maxBatch, threads int
		splitAll          bool
		spin              time.Duration
	}
	settings := []setting{
		{8, 1, false, spinFor},
		{3, 2, false, spinFor}, // chunks of 3: 2 windows whole, 1 split
		{1, 1, false, spinFor},
		{7, 3, false, spinFor}, // 6 whole, 1 split 3 ways
		{1, 2, false, spinFor}, // every window split 2 ways
		{2, 3, false, 0},       // 2 windows split 3 ways, parking waits
		{8, 2, true, spinFor},  // everything split
	}
	for i, name := range []string{"gpt-a-cat-cpu", "gpt-b-logmix-cpu", "gpt-a-cat"} {
		w := randomWeights(t, name, len(cellIDs), uint64(5+i))
		b := randomBatch(7, cellIDs, 6)
		var first []float32
		for _, tc := range settings {
			if name == "gpt-a-cat" && tc.threads == 3 {
				continue // keep the test fast: the paper CNN is 3x the work
			}
			e, err := NewFromWeights(w, cellIDs, tc.maxBatch, tc.threads)
			if err != nil {
				t.Fatal(err)
			}
			e.splitAll, e.wakeParked = tc.splitAll, true
			e.setSpin(tc.spin)
			out := make([]float32, b.Len()*rgc.NumClasses)
			// Twice: the second call reuses the buffers of the first.
			for range 2 {
				if err := e.Predict(b, out); err != nil {
					t.Fatal(err)
				}
			}
			e.Close()
			if first == nil {
				first = out
				continue
			}
			for i := range out {
				if out[i] != first[i] {
					t.Fatalf("%s %+v: output %d = %v, want %v", name, tc, i, out[i], first[i])
				}
			}
		}
	}
}

// TestEngineZeroAllocs: no allocation per call, on 1 and 2 threads, with
// windows whole (chunks of 4) and split (chunks of 3 on 2 threads: one
// window split; a chunk of 1: split).
func TestEngineZeroAllocs(t *testing.T) {
	for _, tc := range [][2]int{{4, 1}, {4, 2}, {3, 2}, {1, 2}} {
		maxBatch, threads := tc[0], tc[1]
		w := randomWeights(t, "gpt-a-logmix-cpu", len(cellIDs), 8)
		e, err := NewFromWeights(w, cellIDs, maxBatch, threads)
		if err != nil {
			t.Fatal(err)
		}
		b := randomBatch(6, cellIDs, 9)
		out := make([]float32, b.Len()*rgc.NumClasses)
		allocs := testing.AllocsPerRun(5, func() {
			if err := e.Predict(b, out); err != nil {
				t.Fatal(err)
			}
		})
		e.Close()
		if allocs != 0 {
			t.Errorf("maxBatch %d threads %d: %v allocations per Predict, want 0", maxBatch, threads, allocs)
		}
	}
}

func TestEngineErrors(t *testing.T) {
	w := randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 1)
	e, err := NewFromWeights(w, cellIDs, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := randomBatch(2, cellIDs, 1)
	out := make([]float32, 2*rgc.NumClasses)
	cases := []struct {
		name string
		b    *rgc.Batch
		out  []float32
		want string
	}{
		{"unknown cell", &rgc.Batch{Inputs: b.Inputs, Cells: []int{12, 999}, Ends: b.Ends}, out, "unknown cell id 999"},
		{"short inputs", &rgc.Batch{Inputs: b.Inputs[:100], Cells: b.Cells, Ends: b.Ends}, out, "inputs"},
		{"short output", b, out[:90], "output of 90"},
	}
	for _, c := range cases {
		if err := e.Predict(c.b, c.out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
	e.Close()
	if err := e.Predict(b, out); err == nil {
		t.Error("Predict after Close succeeded")
	}
	if _, err := NewFromWeights(w, []int{1, 2}, 4, 1); err == nil {
		t.Error("NewFromWeights with too few cell ids succeeded")
	}
	if _, err := NewFromWeights(w, []int{1, 1, 2}, 4, 1); err == nil {
		t.Error("NewFromWeights with duplicate cell ids succeeded")
	}
	if _, err := New(&model.Checkpoint{Weights: w, CellIDs: cellIDs}, 4, 1); err == nil {
		t.Error("New with an invalid checkpoint (no time base) succeeded")
	}
}

// TestEngineCopiesWeights: changing the weights after New must not change
// the engine's outputs.
func TestEngineCopiesWeights(t *testing.T) {
	w := randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 3)
	e, err := NewFromWeights(w, cellIDs, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := randomBatch(2, cellIDs, 4)
	before := make([]float32, 2*rgc.NumClasses)
	after := make([]float32, 2*rgc.NumClasses)
	if err := e.Predict(b, before); err != nil {
		t.Fatal(err)
	}
	for _, ts := range w.Tensors {
		for i := range ts {
			ts[i] *= 2
		}
	}
	if err := e.Predict(b, after); err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("output %d changed from %v to %v after the weights changed", i, before[i], after[i])
		}
	}
}

// TestEngineContentionBackoff: split calls whose waits for a partner's
// chunk parked more than twice per window (parks added to the counter
// during the call, as a helper descheduled mid-chunk makes them) make the
// engine run windows whole after contendedCalls calls, for backoffCalls
// calls, with unchanged outputs; it then splits again, and backs off twice
// as long when the contention persists.
func TestEngineContentionBackoff(t *testing.T) {
	w := randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 11)
	b := randomBatch(1, cellIDs, 12)
	e, err := NewFromWeights(w, cellIDs, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.wakeParked = true // every call splits unless backing off
	const parked = 3    // parks per contended call
	call := func(out []float32, contended bool) {
		t.Helper()
		for !e.team.ready() { // the helper joins every call
			runtime.Gosched()
		}
		if contended {
			e.tk.parks.Add(parked)
		}
		if err := e.Predict(b, out); err != nil {
			t.Fatal(err)
		}
	}
	split := make([]float32, rgc.NumClasses)
	for i := 0; i < contendedCalls; i++ {
		if e.Stats().Backoffs != 0 {
			t.Fatalf("back-off after %d contended calls, want %d", i, contendedCalls)
		}
		call(split, true)
	}
	if e.Stats().Backoffs != 1 || e.backoff != backoffCalls {
		t.Fatalf("after %d contended split calls: %d backoffs, %d calls left, want 1 and %d", contendedCalls, e.Stats().Backoffs, e.backoff, backoffCalls)
	}
	whole := make([]float32, rgc.NumClasses)
	for i := 0; i < backoffCalls; i++ {
		call(whole, false)
	}
	if e.backoff != 0 || e.Stats().Backoffs != 1 {
		t.Fatalf("after %d whole calls: %d calls left, %d backoffs, want 0 and 1", backoffCalls, e.backoff, e.Stats().Backoffs)
	}
	for i := range whole {
		if whole[i] != split[i] {
			t.Fatalf("class %d: whole window %v, split %v", i, whole[i], split[i])
		}
	}
	// Splitting again meets contention again: a back-off twice as long.
	for i := 0; i < contendedCalls; i++ {
		call(whole, true)
	}
	if e.Stats().Backoffs != 2 || e.backoff != 2*backoffCalls {
		t.Errorf("split retried after the back-off: %d backoffs, %d calls left, want 2 and %d", e.Stats().Backoffs, e.backoff, 2*backoffCalls)
	}
	// The counters the daemon exports: every call counted, the split ones
	// parked, the back-off's calls run whole.
	calls := int64(2*contendedCalls + backoffCalls)
	want := Stats{Calls: calls, Windows: calls, SplitWindows: 2 * contendedCalls, Backoffs: 2,
		BackoffCalls: backoffCalls, BackingOff: true, Threads: 2}
	got := e.Stats()
	if got.Parks < parked*2*contendedCalls {
		t.Errorf("%d parks counted over %d contended calls, want at least %d", got.Parks, 2*contendedCalls, parked*2*contendedCalls)
	}
	got.Parks = 0
	if got != want {
		t.Errorf("Stats %+v, want %+v (parks aside)", got, want)
	}
}

// TestLoneWindowLeavesParkedHelper: a lone window runs on the caller alone
// when the helper is parked, and is split when the helper still polls
// after the previous call; outputs are the same.
func TestLoneWindowLeavesParkedHelper(t *testing.T) {
	e, err := NewFromWeights(randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 3), cellIDs, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := randomBatch(1, cellIDs, 4)
	alone, split := make([]float32, rgc.NumClasses), make([]float32, rgc.NumClasses)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("helper never %s", what)
			}
		}
	}
	e.setSpin(0) // the helper parks as soon as it has reported
	waitFor("parked", func() bool { return e.team.ready() && e.team.parked() })
	if err := e.Predict(b, alone); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats().SplitWindows; s != 0 {
		t.Fatalf("%d windows split with the helper parked, want 0", s)
	}
	// The helper polls without end once woken (by a batch of two).
	e.setSpin(time.Hour)
	e.team.idle.Store(int64(time.Hour))
	if err := e.Predict(randomBatch(2, cellIDs, 5), make([]float32, 2*rgc.NumClasses)); err != nil {
		t.Fatal(err)
	}
	waitFor("reported", e.team.ready)
	if e.team.parked() {
		t.Fatal("helper parked while polling for an hour")
	}
	if err := e.Predict(b, split); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats().SplitWindows; s != 1 {
		t.Fatalf("%d windows split with the helper polling, want 1", s)
	}
	for i := range alone {
		if alone[i] != split[i] {
			t.Fatalf("class %d: %v alone, %v split", i, alone[i], split[i])
		}
	}
	e.setSpin(0) // let Close's wake-up find it parked or polling
}

// TestLoneWindowWakesForLongWindows: a lone window that finds the helper
// parked wakes it when woken calls have been faster than calls run alone,
// except every relearnCalls-th, which runs alone; and the other way round.
func TestLoneWindowWakesForLongWindows(t *testing.T) {
	e, err := NewFromWeights(randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 3), cellIDs, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := randomBatch(1, cellIDs, 4)
	out := make([]float32, rgc.NumClasses)
	e.setSpin(0) // the helper parks as soon as it has reported
	for _, wake := range []bool{true, false} {
		e.loneCalls = 0
		for i := 1; i <= 2*relearnCalls; i++ {
			for deadline := time.Now().Add(10 * time.Second); !e.team.ready() || !e.team.parked(); time.Sleep(50 * time.Microsecond) {
				if time.Now().After(deadline) {
					t.Fatal("helper never parked")
				}
			}
			// As if calls run alone took an hour (wake) or woken ones did.
			e.loneAlone, e.loneWoken = time.Millisecond, time.Hour
			if wake {
				e.loneAlone, e.loneWoken = time.Hour, time.Millisecond
			}
			e.contended = 0 // no contention back-off (a slow helper under -race)
			before := e.Stats().SplitWindows
			if err := e.Predict(b, out); err != nil {
				t.Fatal(err)
			}
			split := e.Stats().SplitWindows - before
			want := int64(0)
			if wake != (i%relearnCalls == 0) {
				want = 1
			}
			if split != want {
				t.Fatalf("wake %v, lone call %d: %d windows split, want %d", wake, i, split, want)
			}
			if mean := map[bool]time.Duration{true: e.loneAlone, false: e.loneWoken}[split == 0]; mean >= time.Hour {
				t.Fatalf("wake %v, lone call %d: the mean of the way it went was not updated", wake, i)
			}
		}
	}
}
