package engine

import (
	"fmt"
	"testing"

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

// BenchmarkStages breaks the gpt-a-cat forward pass of one window into its
// stages (CPU time per window of each).
func BenchmarkStages(b *testing.B) {
	w := randomWeights(b, "gpt-a-cat", len(cellIDs), 1)
	e, err := NewFromWeights(w, cellIDs, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	window := randomBatch(1, cellIDs, 2).Inputs
	n, wk := e.net, e.workers[0]
	stage := func(name string, f func()) {
		c0 := processCPU()
		for i := 0; i < b.N; i++ {
			f()
		}
		b.ReportMetric(1e3*(processCPU()-c0)/float64(b.N), name+"-cpu-ms")
	}
	for b.Loop() {
		n.forward(wk, window, 0, wk.logits)
	}
	x := n.stem(wk, window)
	y := n.cnnBlocks(wk, x)
	stage("stem", func() { n.stem(wk, window) })
	stage("blocks", func() { n.cnnBlocks(wk, x) })
	stage("gpt", func() { n.gpt(wk, y, 0) })
	stage("head", func() { n.headLast(wk, wk.logits) })
}

// BenchmarkReference is the float64 reference forward pass of the test
// file: the plain-Go baseline in the same run.
func BenchmarkReference(b *testing.B) {
	w := randomWeights(b, "gpt-a-cat", len(cellIDs), 1)
	window := randomBatch(1, cellIDs, 2).Inputs
	ref := refNet{c: w.Config, w: w}
	for b.Loop() {
		ref.forward(window, 0)
	}
}
