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
