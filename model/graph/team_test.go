package graph

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"rgcpred/base/spin/spintest"
	"rgcpred/model"
)

// chunkFunc is a function as a body, for the tests' one-off sections (a
// closure allocates when it escapes; the kernels use fields of their own).
type chunkFunc func(lo, hi, w int)

func (f chunkFunc) chunk(lo, hi, w int) { f(lo, hi, w) }

// testPar returns a parallel of n workers on a team closed at the end of
// the test.
func testPar(tb testing.TB, n int) parallel {
	t := newTeam(n - 1)
	tb.Cleanup(t.close)
	return parallel{n: n, t: t}
}

// TestParallelTeam runs jobs of several sizes on teams of several sizes
// (and with fewer Ps than workers, and within a hold): every index is covered exactly once,
// each worker takes the static chunk w of the contract, the worker indices
// of a job are distinct and below its worker count, totals below the
// worker count use that many workers, a job sees the writes of the one
// before, and a sub-team of the workers (gemmTeam's) runs on the same
// helpers.
func TestParallelTeam(t *testing.T) {
	defer spintest.Watchdog(t, 120*time.Second)()
	for _, tc := range []struct {
		workers, procs int
		hold           bool // within a hold: nobody parks
	}{
		{1, 0, false}, {2, 0, false}, {3, 0, false}, {4, 0, false}, {2, 1, false}, {4, 1, false}, {3, 2, false},
		{2, 0, true}, {3, 0, true}, {2, 1, true}, {4, 1, true},
	} {
		t.Run(fmt.Sprintf("workers=%d/procs=%d/hold=%v", tc.workers, tc.procs, tc.hold), func(t *testing.T) {
			if tc.procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			}
			p := testPar(t, tc.workers)
			if tc.hold {
				p.t.hold()
				defer p.t.release()
			}
			const size = 1000
			acc := make([]int, size)
			for _, total := range []int{1, 2, 3, 5, 17, size, size - 1, 0} {
				for sub := 1; sub <= tc.workers; sub++ {
					q := parallel{n: sub, t: p.t}
					n := min(sub, total)
					hits := make([]atomic.Int32, max(total, 1))
					seen := make([]atomic.Int32, tc.workers+1)
					q.run(total, chunkFunc(func(lo, hi, w int) {
						seen[min(max(w, 0), tc.workers)].Add(1)
						if want := total * w / max(n, 1); lo != want || hi != total*(w+1)/max(n, 1) {
							t.Errorf("total %d on %d: worker %d got [%d, %d), want the static chunk from %d", total, sub, w, lo, hi, want)
						}
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
							// Plain read and write: the job before
							// (same j, smaller sub) left acc[i] at its
							// count, visible here.
							acc[i]++
						}
					}))
					for i := range total {
						if h := hits[i].Load(); h != 1 {
							t.Fatalf("total %d on %d workers: index %d run %d times, want 1", total, sub, i, h)
						}
					}
					for w := range tc.workers + 1 {
						want := int32(0)
						if w < max(n, 1) {
							want = 1
						}
						if got := seen[w].Load(); got != want {
							t.Fatalf("total %d on %d workers: worker %d called %d times, want %d", total, sub, w, got, want)
						}
					}
				}
			}
			// Every index below each total was incremented once per
			// sub-team size per job covering it.
			for i, v := range acc {
				want := 0
				for _, total := range []int{1, 2, 3, 5, 17, size, size - 1, 0} {
					if i < total {
						want += tc.workers
					}
				}
				if v != want {
					t.Fatalf("acc[%d] = %d, want %d: a job missed an earlier job's write", i, v, want)
				}
			}
		})
	}
}

// TestParallelSequentialJobs chains many small jobs, each reading what
// the one before wrote in other workers' chunks (it reads one buffer and
// writes the other, then they swap): a helper that ran ahead, or ran a
// stale job, or a caller that returned early, shows.
func TestParallelSequentialJobs(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p := testPar(t, workers)
			const size, jobs = 64, 5000
			src, dst := make([]int, size), make([]int, size)
			var bad atomic.Int32
			for j := 1; j <= jobs; j++ {
				p.run(size, chunkFunc(func(lo, hi, _ int) {
					for i := lo; i < hi; i++ {
						// src[(i+1)%size] is in another worker's chunk
						// at this chunk's end.
						if src[(i+1)%size] != j-1 {
							bad.Add(1)
						}
						dst[i] = j
					}
				}))
				src, dst = dst, src
				if j%997 == 0 {
					time.Sleep(2 * time.Millisecond) // let the helpers park
				}
			}
			if bad.Load() != 0 {
				t.Fatalf("%d reads of a value other than the previous job's", bad.Load())
			}
			if slices.ContainsFunc(src, func(v int) bool { return v != jobs }) {
				t.Fatalf("after %d jobs: %v", jobs, src)
			}
		})
	}
}

// TestParallelPanic: a panic in a helper's chunk or the caller's reaches
// the caller once the other chunks are done, without a hang, and the team
// runs the next job.
func TestParallelPanic(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	for _, tc := range []struct {
		name  string
		fails []int // workers whose chunk panics
	}{
		{"helper", []int{1}},
		{"caller", []int{0}},
		{"both", []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPar(t, 2)
			var done atomic.Int32
			got := func() (v any) {
				defer func() { v = recover() }()
				p.run(10, chunkFunc(func(lo, hi, w int) {
					if slices.Contains(tc.fails, w) {
						if w == 0 {
							time.Sleep(time.Millisecond) // the helper finishes first
						}
						panic(fmt.Sprintf("worker %d", w))
					}
					time.Sleep(time.Millisecond)
					done.Add(1)
				}))
				return nil
			}()
			if got == nil {
				t.Fatal("no panic reached the caller")
			}
			if want := fmt.Sprintf("worker %d", tc.fails[0]); got != want {
				t.Errorf("caller got panic %v, want %q", got, want)
			}
			if d, want := done.Load(), int32(2-len(tc.fails)); d != want {
				t.Errorf("%d chunks finished before the panic reached the caller, want %d", d, want)
			}
			var n atomic.Int32
			p.run(10, chunkFunc(func(lo, hi, _ int) { n.Add(int32(hi - lo)) }))
			if n.Load() != 10 {
				t.Errorf("next job covered %d of 10 indices", n.Load())
			}
		})
	}
}

// TestTeamClose: closing stops every helper goroutine (a graph's too), is
// idempotent, and a closed team still runs jobs, on the caller alone.
func TestTeamClose(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	// Helpers are counted by their function in the goroutines' stacks:
	// other tests' goroutines may start or end meanwhile.
	base := teamHelpers()
	tm := newTeam(3)
	p := parallel{n: 4, t: tm}
	p.run(8, chunkFunc(func(lo, hi, w int) {}))
	if g := teamHelpers(); g != base+3 {
		t.Fatalf("%d team helpers with a team of 3 running, want %d", g, base+3)
	}
	tm.close()
	tm.close()
	var ws []int
	p.run(8, chunkFunc(func(lo, hi, w int) { ws = append(ws, w) })) // plain append: only the caller runs
	if !slices.Equal(ws, []int{0, 1, 2, 3}) {
		t.Errorf("closed team ran workers %v, want 0 1 2 3 in order on the caller", ws)
	}

	w := randomWeights(t, tinyConfig(model.HeadCat, false), 3)
	x, cells, tg := randomBatch(w.Config, 4, 3)
	for range 5 {
		g, err := New(w, 4, Options{Training: true, Threads: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetInputs(x, cells, tg); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Run(); err != nil {
			t.Fatal(err)
		}
		g.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); teamHelpers() > base; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d team helpers after closing every team, want at most %d as before", teamHelpers(), base)
		}
	}
}

// teamHelpers counts the goroutines running a team's helper loop.
func teamHelpers() int { return spintest.Running("graph.(*team).helper(") }

// TestTeamHold: within a hold the helpers poll instead of parking, even
// between jobs far apart, and the jobs run; after release they park again;
// a hold on a one-thread graph's (nil) team is a no-op.
func TestTeamHold(t *testing.T) {
	defer spintest.Watchdog(t, 60*time.Second)()
	var none *team
	none.hold()
	none.release()
	p := testPar(t, 3)
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 5 s", what)
			}
		}
	}
	var sum atomic.Int64
	job := func() { p.run(30, chunkFunc(func(lo, hi, _ int) { sum.Add(int64(hi - lo)) })) }
	job()
	until("helpers parked", func() bool { return p.t.idle.Waiting() == 2 })
	p.t.hold()
	until("helpers polling", func() bool { return p.t.idle.Waiting() == 0 })
	for range 3 {
		time.Sleep(20 * time.Millisecond) // 200 x spin.For
		if n := p.t.idle.Waiting(); n != 0 {
			t.Fatalf("%d helpers parked within a hold", n)
		}
		job()
	}
	p.t.release()
	until("helpers parked after release", func() bool { return p.t.idle.Waiting() == 2 })
	job()
	if got := sum.Load(); got != 5*30 {
		t.Errorf("jobs covered %d indices, want %d", got, 5*30)
	}
}

// TestParallelAllocs: a parallel section on a warm team allocates at
// most fn's closure, which the job description hands to the helpers: no
// goroutine, no per-helper closure, no wait group.
func TestParallelAllocs(t *testing.T) {
	p := testPar(t, 2)
	d := make([]float32, 4096)
	run := func() {
		p.run(len(d), chunkFunc(func(lo, hi, _ int) {
			for i := lo; i < hi; i++ {
				d[i]++
			}
		}))
	}
	run()
	if n := testing.AllocsPerRun(100, run); n > 1 {
		t.Errorf("%.1f allocations per parallel section, want <= 1", n)
	}
}
