package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"rgcpred/model"
	"rgcpred/model/ref"
	"rgcpred/rgc"
)

// BenchmarkPredict measures batch-1 latency on one thread and batched
// throughput on two threads (goals for gpt-a-cat: <= 2.0 ms per window on
// one core; >= 1000 windows/s on two; PyTorch 1.13 on this machine: 3.8 ms
// and ~400/s).
func BenchmarkPredict(b *testing.B) {
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu", "gpt-b-cat", "gpt-a-logmix"} {
		for _, tc := range []struct{ batch, threads int }{{1, 1}, {64, 1}, {64, 2}} {
			if name != "gpt-a-cat" && tc.batch == 64 && tc.threads == 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/batch%d/threads%d", name, tc.batch, tc.threads), func(b *testing.B) {
				w := randomWeights(b, name, len(cellIDs), 1)
				e, err := NewFromWeights(w, cellIDs, tc.batch, tc.threads)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				batch := randomBatch(tc.batch, cellIDs, 2)
				out := make([]float32, tc.batch*rgc.NumClasses)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if err := e.Predict(batch, out); err != nil {
						b.Fatal(err)
					}
				}
				cpu := processCPU() - cpu0
				sec := b.Elapsed().Seconds()
				windows := float64(b.N * tc.batch)
				b.ReportMetric(1e3*sec/float64(b.N), "ms/batch")
				b.ReportMetric(windows/sec, "windows/s")
				// CPU time per window (all threads): the wall-clock figures
				// are inflated when other processes share the cores.
				b.ReportMetric(1e3*cpu/windows, "cpu-ms/window")
			})
		}
	}
}

// BenchmarkStages breaks the forward pass of one window (gpt-a-cat,
// gpt-a-cat-cpu and gpt-b-cat-cpu) into its stages (CPU time per window of
// each), in each precision the CPU runs natively.
func BenchmarkStages(b *testing.B) {
	precs := nativePrecisions()
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu", "gpt-b-cat-cpu"} {
		for _, prec := range precs {
			b.Run(name+"/"+string(prec), func(b *testing.B) {
				w := randomWeights(b, name, len(cellIDs), 1)
				e, err := NewFromWeights(w, cellIDs, 1, 1)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				if err := e.Force(prec); err != nil {
					b.Fatal(err)
				}
				window := randomBatch(1, cellIDs, 2).Inputs
				n, wk := e.net, e.workers[0]
				p := &pass{wk: wk, a: wk.acts}
				stage := func(name string, f func()) {
					c0 := processCPU()
					for i := 0; i < b.N; i++ {
						f()
					}
					b.ReportMetric(1e3*(processCPU()-c0)/float64(b.N), name+"-cpu-ms")
				}
				pl := &plan{rows: &e.plans[0]} // every row, no carry-over
				for b.Loop() {
					n.forward(p, window, 0, pl, wk.acts.logits, false)
				}
				x := n.stem(p, window, pl.rows)
				y := n.cnnBlocks(p, x, pl)
				stage("stem", func() { n.stem(p, window, pl.rows) })
				stage("blocks", func() { n.cnnBlocks(p, x, pl) })
				stage("gpt", func() { n.gpt(p, y, 0) })
				stage("head", func() { n.headLast(p, wk.acts.logits) })
			})
		}
	}
}

// BenchmarkSmall measures the wall-clock latency of the small batches the
// daemon runs at each frame (1-4 windows) on 1 and 2 threads, for the paper
// CNN and the CPU preset; batch 2 also with every window split across the
// threads (split) instead of one window per thread, and batch 1 with
// waits that park at once (chan) or spin without bound (spin) instead of
// spinning for spinFor, then parking.
func BenchmarkSmall(b *testing.B) {
	type variant struct {
		batch, threads int
		mode           string // "", "split" or "chan"
	}
	var vs []variant
	for batch := 1; batch <= 4; batch++ {
		vs = append(vs, variant{batch, 1, ""}, variant{batch, 2, ""})
	}
	vs = append(vs, variant{2, 2, "split"}, variant{1, 2, "chan"}, variant{1, 2, "spin"},
		variant{1, 2, "spin100us"}, variant{1, 2, "spin300us"}, variant{1, 2, "spin1ms"})
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu"} {
		w := randomWeights(b, name, len(cellIDs), 1)
		for _, v := range vs {
			label := fmt.Sprintf("%s/batch%d/threads%d", name, v.batch, v.threads)
			if v.mode != "" {
				label += "/" + v.mode
			}
			b.Run(label, func(b *testing.B) {
				e, err := NewFromWeights(w, cellIDs, v.batch, v.threads)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				e.splitAll, e.wakeParked = v.mode == "split", true
				switch v.mode {
				case "chan":
					e.setSpin(0)
				case "spin":
					e.setSpin(time.Hour)
				case "spin100us":
					e.setSpin(100 * time.Microsecond)
				case "spin300us":
					e.setSpin(300 * time.Microsecond)
				case "spin1ms":
					e.setSpin(time.Millisecond)
				}
				batch := randomBatch(v.batch, cellIDs, 2)
				out := make([]float32, v.batch*rgc.NumClasses)
				b.ReportAllocs()
				lat := timeCalls(b, nil, func() {
					if err := e.Predict(batch, out); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(1e3*b.Elapsed().Seconds()/float64(b.N), "ms/batch")
				// On shared cores the mean is dominated by the times a
				// thread was descheduled; the minimum and median show the
				// quiet-machine figure.
				b.ReportMetric(lat[0].Seconds()*1e3, "min-ms")
				b.ReportMetric(lat[len(lat)/2].Seconds()*1e3, "p50-ms")
				b.ReportMetric(float64(e.Stats().Backoffs), "backoffs")
			})
		}
	}
}

// BenchmarkReuse measures batch-1 calls whose windows move 80 bins on from
// their cell's last (the daemon after "no spike"), carrying block 0's rows
// over (reuse) or computing every row (whole), on 1 and 2 threads, in each
// precision the CPU runs natively.
func BenchmarkReuse(b *testing.B) {
	precs := nativePrecisions()
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu"} {
		w := randomWeights(b, name, len(cellIDs), 1)
		for _, prec := range precs {
			for _, threads := range []int{1, 2} {
				for _, mode := range []string{"whole", "reuse"} {
					b.Run(fmt.Sprintf("%s/%s/threads%d/%s", name, prec, threads, mode), func(b *testing.B) {
						benchReuse(b, w, prec, threads, mode == "reuse")
					})
				}
			}
		}
	}
}

func benchReuse(b *testing.B, w *model.Weights, prec Precision, threads int, reuse bool) {
	e, err := NewFromWeights(w, cellIDs, 1, threads)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := e.Force(prec); err != nil {
		b.Fatal(err)
	}
	e.SetReuse(reuse)
	e.wakeParked = true // threads 2: every window split
	m := newMover(e, 3000)
	for range 3 {
		m.next(b)
	}
	b.ReportAllocs()
	lat := timeCalls(b, nil, func() { m.next(b) })
	b.ReportMetric(lat[0].Seconds()*1e3, "min-ms")
	b.ReportMetric(lat[len(lat)/2].Seconds()*1e3, "p50-ms")
}

// nativePrecisions returns the precisions this CPU runs natively.
func nativePrecisions() []Precision {
	var ps []Precision
	for _, p := range []Precision{FP32, BF16, INT8} {
		if Native(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// timeCalls runs call once per iteration of b's loop, after before (nil:
// nothing) outside the timing, and returns the times of the first 65,536
// calls, sorted.
func timeCalls(b *testing.B, before, call func()) []time.Duration {
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		if before != nil {
			before()
		}
		t0 := time.Now()
		call()
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	return lat
}

// BenchmarkReference is the float64 reference forward pass (model/ref):
// the plain-Go baseline in the same run.
func BenchmarkReference(b *testing.B) {
	w := randomWeights(b, "gpt-a-cat", len(cellIDs), 1)
	window := randomBatch(1, cellIDs, 2).Inputs
	net, err := ref.New(w)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		net.Forward(window, 0)
	}
}

// BenchmarkPhase measures one phase of two one-row chunks crossed by two
// goroutines with no work in the chunks (ns/op per phase): spinning (the
// default spin-then-park), and parking at once (park).
func BenchmarkPhase(b *testing.B) {
	for _, mode := range []string{"spin", "park"} {
		b.Run(mode, func(b *testing.B) {
			tk := newTickets()
			if mode == "park" {
				tk.spin.Store(0)
			}
			n := b.N
			walk := func() {
				p := pass{tk: tk, threads: 2, synced: true}
				for i := 0; i < n; i++ {
					for c := p.open(2, 2, 1); c.next(); {
					}
					p.sync()
				}
			}
			done := make(chan struct{})
			go func() {
				walk()
				close(done)
			}()
			b.ResetTimer()
			walk()
			<-done
		})
	}
}

// BenchmarkPaced is the daemon's situation: one call every millisecond (a
// frame), so that the helper threads park between calls. Batch 1: the
// engine runs the window alone, or (wake) wakes the helper to split it.
// Batch 2: a window per thread, with the helper woken by the call, or
// (expect) kept polling by an Expect a millisecond ahead, as the daemon
// core announces the next frame's call. Reports the median and 99th
// percentile latency.
func BenchmarkPaced(b *testing.B) {
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu"} {
		w := randomWeights(b, name, len(cellIDs), 1)
		for _, prec := range pacedPrecisions() {
			benchPaced(b, name, w, prec)
		}
	}
}

// pacedPrecisions are the precisions BenchmarkPaced runs: bf16 and int8
// where the CPU runs them natively, else fp32.
func pacedPrecisions() []Precision {
	var ps []Precision
	for _, p := range nativePrecisions() {
		if p != FP32 {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		ps = []Precision{FP32}
	}
	return ps
}

func benchPaced(b *testing.B, name string, w *model.Weights, prec Precision) {
	for _, v := range []struct {
		batch, threads int
		wake, expect   bool
	}{{1, 1, false, false}, {1, 2, false, false}, {1, 2, true, false}, {2, 2, false, false}, {2, 2, false, true}} {
		label := fmt.Sprintf("%s/%s/batch%d/threads%d", name, prec, v.batch, v.threads)
		if v.wake {
			label += "/wake" // a parked helper is woken to split the window
		}
		if v.expect {
			label += "/expect" // each call announced a millisecond ahead (Expect)
		}
		b.Run(label, func(b *testing.B) {
			e, err := NewFromWeights(w, cellIDs, v.batch, v.threads)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			e.wakeParked = v.wake
			if err := e.Force(prec); err != nil {
				b.Fatal(err)
			}
			// The helpers sleep after spinFor between calls unless the
			// call is expected. Each window moves 80 bins on from its
			// cell's last, as in the daemon after "no spike".
			m := newMover(e, 3000).group(v.batch)
			next := time.Now()
			pace := func() {
				if v.expect {
					e.Expect(v.batch, 2*time.Millisecond)
				}
				next = next.Add(time.Millisecond)
				time.Sleep(time.Until(next))
			}
			lat := timeCalls(b, pace, func() { m.next(b) })
			b.ReportMetric(lat[len(lat)/2].Seconds()*1e3, "p50-ms")
			b.ReportMetric(lat[len(lat)*99/100].Seconds()*1e3, "p99-ms")
			b.ReportMetric(float64(e.Stats().Backoffs), "backoffs")
		})
	}
}
