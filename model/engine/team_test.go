package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rgcpred/base/spin/spintest"
	"rgcpred/rgc"
)

// jitter sometimes yields or sleeps briefly, to shuffle the interleavings
// (a descheduled thread on a loaded machine).
func jitter(rng *rand.Rand) {
	switch rng.IntN(16) {
	case 0:
		runtime.Gosched()
	case 1:
		time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
	}
}

// TestTicketsStress: threads walk the same long sequence of phases of
// random sizes (as the threads of a split window do), claiming chunks,
// with random yields and sleeps (a thread falling behind and joining late),
// under GOMAXPROCS 1 and 2, waiting parked at once or after a short spin.
// Every chunk must be claimed by exactly one thread, no chunk of a phase
// before the previous phase is done, and every chunk of a phase must be
// done when sync returns; the test fails (with stacks) instead of hanging.
func TestTicketsStress(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, threads := range []int{2, 3} {
			for _, spin := range []time.Duration{0, 2 * time.Microsecond, spinFor} {
				t.Run(fmt.Sprintf("procs%d/threads%d/spin%v", procs, threads, spin), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					defer spintest.Watchdog(t, 60*time.Second)()
					const phases = 1500
					rng := rand.New(rand.NewPCG(7, uint64(threads)))
					sizes := make([]int, phases)
					for k := range sizes {
						sizes[k] = 1 + rng.IntN(80)
					}
					tk := newTickets()
					tk.spin.Store(int64(spin))
					// claims[k][r] counts the claims of row r of phase k,
					// done[k][r] is set when its chunk's work is over.
					claims := make([][]atomic.Int32, phases)
					done := make([][]atomic.Bool, phases)
					for k, n := range sizes {
						claims[k] = make([]atomic.Int32, n)
						done[k] = make([]atomic.Bool, n)
					}
					var bad atomic.Value
					fail := func(format string, args ...any) {
						bad.CompareAndSwap(nil, fmt.Sprintf(format, args...))
					}
					var wg sync.WaitGroup
					for th := 0; th < threads; th++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(th), 8))
							p := pass{tk: tk, threads: threads, synced: true}
							for k, n := range sizes {
								jitter(rng)
								for c := p.rows(n); c.next(); {
									if k > 0 {
										for r := range done[k-1] {
											if !done[k-1][r].Load() {
												fail("thread %d claimed rows %d..%d of phase %d before row %d of phase %d was done", th, c.lo, c.hi, k, r, k-1)
											}
										}
									}
									for r := c.lo; r < c.hi; r++ {
										if claims[k][r].Add(1) != 1 {
											fail("row %d of phase %d claimed twice", r, k)
										}
									}
									jitter(rng)
									for r := c.lo; r < c.hi; r++ {
										done[k][r].Store(true)
									}
								}
								p.sync()
								for r := range done[k] {
									if !done[k][r].Load() {
										fail("thread %d past phase %d with its row %d not done", th, k, r)
									}
								}
							}
						}()
					}
					wg.Wait()
					if msg := bad.Load(); msg != nil {
						t.Fatal(msg)
					}
					for k := range claims {
						for r := range claims[k] {
							if c := claims[k][r].Load(); c != 1 {
								t.Fatalf("row %d of phase %d claimed %d times, want 1", r, k, c)
							}
						}
					}
				})
			}
		}
	}
}

// TestTeamStress: the caller publishes many jobs (only when every helper
// has reported the previous one, as dispatch does) while helpers park at
// once or after a short spin, with random yields and sleeps, and a quarter
// of the jobs announced ahead (expect) so that helpers also poll through
// gaps and wake from parking without a job; every helper must run each
// published job exactly once, in order.
func TestTeamStress(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, helpers := range []int{1, 2} {
			for _, spin := range []time.Duration{0, 2 * time.Microsecond, spinFor} {
				t.Run(fmt.Sprintf("procs%d/helpers%d/spin%v", procs, helpers, spin), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					defer spintest.Watchdog(t, 60*time.Second)()
					const calls = 3000
					tm := newTeam(helpers)
					tm.idle.Store(int64(spin))
					var job atomic.Int64 // the current job, published before start
					ran := make([]atomic.Int64, helpers)
					var bad atomic.Value
					var wg sync.WaitGroup
					for h := 0; h < helpers; h++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(h), 4))
							var seen uint32
							for {
								seen = tm.next(seen)
								if tm.quit.Load() {
									return
								}
								j := job.Load()
								if r := ran[h].Add(1); r != j {
									bad.CompareAndSwap(nil, fmt.Sprintf("helper %d ran %d jobs in job %d", h, r, j))
								}
								jitter(rng)
								tm.report()
							}
						}()
					}
					rng := rand.New(rand.NewPCG(9, 5))
					var published int64
					for range calls {
						if rng.IntN(4) == 0 { // a job announced ahead (Engine.Expect)
							tm.expect(time.Now().Add(time.Duration(rng.IntN(200)) * time.Microsecond).UnixNano())
						}
						if tm.ready() {
							published++
							job.Store(published)
							tm.start()
						}
						jitter(rng)
					}
					for !tm.ready() {
						runtime.Gosched()
					}
					for h := range ran {
						if r := ran[h].Load(); r != published {
							t.Errorf("helper %d ran %d jobs, want the %d published", h, r, published)
						}
					}
					// A sanity bound, not a speed test: helpers polling for
					// announced jobs on an oversubscribed machine (go test
					// ./... beside) slow the reports to a few per cent.
					if published < calls/300 {
						t.Errorf("%d of %d calls published: the team is rarely ready", published, calls)
					}
					tm.quit.Store(true)
					tm.start()
					wg.Wait()
					if msg := bad.Load(); msg != nil {
						t.Fatal(msg)
					}
				})
			}
		}
	}
}

// TestEngineStress is the daemon's pattern on a loaded machine: many calls
// of batch sizes 1, 2, 3, 4 and 64 in random order on 2 and 3 threads,
// with the contention back-off switching windows between whole and split
// at random, waits parking at once or spinning, calls announced ahead
// (Expect) so that helpers poll for them, random pauses between calls,
// and GOMAXPROCS 1 and 2. Every output must equal the 1-thread
// engine's bit for bit, and the test fails (with stacks) instead of
// hanging.
func TestEngineStress(t *testing.T) {
	const maxBatch = 8
	for _, name := range []string{"gpt-a-cat-cpu", "gpt-a-cat"} {
		w := randomWeights(t, name, len(cellIDs), 21)
		big := randomBatch(64, cellIDs, 22)
		ref, err := NewFromWeights(w, cellIDs, maxBatch, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, big.Len()*rgc.NumClasses)
		if err := ref.Predict(big, want); err != nil {
			t.Fatal(err)
		}
		ref.Close()
		calls := 150
		if name == "gpt-a-cat" {
			calls = 60 // 3x the work per window
		}
		for _, procs := range []int{1, 2} {
			for _, threads := range []int{2, 3} {
				t.Run(fmt.Sprintf("%s/procs%d/threads%d", name, procs, threads), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					defer spintest.Watchdog(t, 120*time.Second)()
					e, err := NewFromWeights(w, cellIDs, maxBatch, threads)
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close()
					rng := rand.New(rand.NewPCG(uint64(procs*10+threads), 6))
					out := make([]float32, big.Len()*rgc.NumClasses)
					sizes := []int{1, 1, 1, 2, 3, 4, 64}
					for c := 0; c < calls; c++ {
						n := sizes[rng.IntN(len(sizes))]
						if n == 64 && rng.IntN(4) != 0 {
							n = 1 // keep the big batches rare
						}
						lo := rng.IntN(big.Len() - n + 1)
						b := &rgc.Batch{Inputs: big.Inputs[lo*rgc.WindowLen : (lo+n)*rgc.WindowLen], Cells: big.Cells[lo : lo+n], Ends: big.Ends[lo : lo+n]}
						switch rng.IntN(7) {
						case 0:
							e.setSpin(0)
						case 1:
							e.setSpin(spinFor)
						case 2:
							e.backoff = rng.IntN(3) // whole for the next calls
						case 3:
							e.splitAll = !e.splitAll
						case 4:
							e.wakeParked = !e.wakeParked
						case 5: // announced, as the daemon core does
							e.Expect(n, time.Duration(rng.IntN(2000))*time.Microsecond)
						}
						if err := e.Predict(b, out[:n*rgc.NumClasses]); err != nil {
							t.Fatal(err)
						}
						for i, v := range out[:n*rgc.NumClasses] {
							if v != want[lo*rgc.NumClasses+i] {
								t.Fatalf("call %d, batch %d from window %d: output %d = %v, want %v", c, n, lo, i, v, want[lo*rgc.NumClasses+i])
							}
						}
						if rng.IntN(8) == 0 {
							time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
						}
					}
				})
			}
		}
	}
}

// TestExpect: Expect of a batch wakes the parked helper, which then polls
// (not parked) until the announced time has passed, or the next call has
// come, and parks again; a lone
// window or a one-thread engine announces nothing; the outputs of the
// expected call are the one-thread engine's bit for bit; and Expect
// allocates nothing.
func TestExpect(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	w := randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 31)
	b := randomBatch(2, cellIDs, 32)
	want := make([]float32, 2*rgc.NumClasses)
	solo, err := NewFromWeights(w, cellIDs, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	solo.Expect(2, time.Second) // no helpers: nothing to keep polling
	if n := solo.Stats().Expects; n != 0 {
		t.Fatalf("one-thread engine counted %d expects, want 0", n)
	}
	if err := solo.Predict(b, want); err != nil {
		t.Fatal(err)
	}
	e, err := NewFromWeights(w, cellIDs, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 5 s", what)
			}
		}
	}
	until("parked helper", e.team.parked)
	e.Expect(1, time.Second) // a lone window: left to dispatch
	time.Sleep(2 * spinFor)
	if !e.team.parked() || e.Stats().Expects != 0 {
		t.Fatalf("Expect(1): parked %v, %d expects; want the helper left parked", e.team.parked(), e.Stats().Expects)
	}
	const poll = 300 * time.Millisecond
	t0 := time.Now()
	e.Expect(2, poll)
	until("helper polling", func() bool { return !e.team.parked() })
	time.Sleep(poll / 3)
	if e.team.parked() && time.Since(t0) < poll {
		t.Fatalf("helper parked %v after Expect(2, %v)", time.Since(t0), poll)
	}
	until("helper parked again", e.team.parked)
	if d := time.Since(t0); d < poll {
		t.Fatalf("helper parked again after %v, want after the announced %v", d, poll)
	}
	e.Expect(2, time.Hour)
	until("helper polling", func() bool { return !e.team.parked() })
	got := make([]float32, len(want))
	if err := e.Predict(b, got); err != nil {
		t.Fatal(err)
	}
	until("helper parked after the expected call", e.team.parked) // not an hour later
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("output %d after Expect: %v, want the one-thread engine's %v", i, got[i], want[i])
		}
	}
	if n := e.Stats().Expects; n != 2 {
		t.Fatalf("%d expects counted, want 2", n)
	}
	if allocs := testing.AllocsPerRun(100, func() { e.Expect(2, time.Millisecond) }); allocs != 0 {
		t.Fatalf("Expect: %v allocations, want 0", allocs)
	}
}

// TestPredictEach: PredictEach hands windows over in order as they become
// final, on the calling goroutine, each part's outputs already Predict's
// bit for bit, the last report being the whole batch; one thread reports
// every window, two threads a batch of 5 in at least two parts (the whole
// windows, then the split one); chunks of maxBatch keep counting across
// the batch. It allocates nothing.
func TestPredictEach(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	w := randomWeights(t, "gpt-a-cat-cpu", len(cellIDs), 41)
	for _, tc := range []struct{ maxBatch, threads int }{{8, 1}, {3, 1}, {8, 2}, {3, 2}} {
		solo, err := NewFromWeights(w, cellIDs, 8, 1)
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewFromWeights(w, cellIDs, tc.maxBatch, tc.threads)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 7; n++ {
			b := randomBatch(n, cellIDs, uint64(40+n))
			want := make([]float32, n*rgc.NumClasses)
			if err := solo.Predict(b, want); err != nil {
				t.Fatal(err)
			}
			for round := range 4 {
				got := make([]float32, len(want))
				var reports []int
				err := e.PredictEach(b, got, func(k int) {
					if len(reports) > 0 && k <= reports[len(reports)-1] || k > n {
						t.Fatalf("maxBatch %d, %d threads, batch %d: report %d after %v", tc.maxBatch, tc.threads, n, k, reports)
					}
					reports = append(reports, k)
					for i := range k * rgc.NumClasses {
						if got[i] != want[i] {
							t.Fatalf("maxBatch %d, %d threads, batch %d: output %d at report %d: %v, want %v",
								tc.maxBatch, tc.threads, n, i, k, got[i], want[i])
						}
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(reports) == 0 || reports[len(reports)-1] != n {
					t.Fatalf("maxBatch %d, %d threads, batch %d, round %d: reports %v, want the last %d", tc.maxBatch, tc.threads, n, round, reports, n)
				}
				if tc.threads == 1 && len(reports) != n {
					t.Fatalf("one thread, batch %d: reports %v, want one per window", n, reports)
				}
				if tc.threads == 2 && tc.maxBatch == 8 && n == 5 && len(reports) < 2 {
					t.Fatalf("two threads, batch 5: reports %v, want the 4 whole windows before the split one", reports)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("maxBatch %d, %d threads, batch %d: outputs differ from Predict's", tc.maxBatch, tc.threads, n)
				}
			}
		}
		b := randomBatch(5, cellIDs, 49)
		out := make([]float32, 5*rgc.NumClasses)
		reports := 0
		done := func(int) { reports++ }
		if a := testing.AllocsPerRun(20, func() {
			if err := e.PredictEach(b, out, done); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Fatalf("maxBatch %d, %d threads: %v allocations per PredictEach", tc.maxBatch, tc.threads, a)
		}
		solo.Close()
		e.Close()
	}
}
