package engine

import (
	"fmt"
	"testing"

	"rgcpred/base/sgemm"
	"rgcpred/rgc"
)

// BenchmarkPrecision compares the float32 and bf16 paths side by side on
// the shipped checkpoints and real windows: batch 1 (the real-time case)
// and the daemon's batch (every cell of the checkpoint due at the same
// frame), on 1 and 2 threads. The figures to compare are the cpu-ms/window
// of neighbouring fp32 and bf16 lines of one run (wall-clock figures are
// inflated when other processes share the cores).
func BenchmarkPrecision(b *testing.B) {
	if !sgemm.BF16Native() {
		b.Skip("bf16 kernels not native here (no AVX512_BF16, or the purego build)")
	}
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu"} {
		ck := loadShipped(b, name)
		cells := min(len(ck.CellIDs), 64)
		for _, tc := range []struct{ batch, threads int }{{1, 1}, {1, 2}, {cells, 1}, {cells, 2}} {
			batch := realWindows(b, ck, tc.batch)
			for _, prec := range []Precision{FP32, BF16} {
				b.Run(fmt.Sprintf("%s/batch%d/threads%d/%s", name, tc.batch, tc.threads, prec), func(b *testing.B) {
					e, err := New(ck, tc.batch, tc.threads)
					if err != nil {
						b.Fatal(err)
					}
					defer e.Close()
					if got, par, err := e.SetPrecision(prec, batch); err != nil || got != prec {
						b.Fatalf("SetPrecision(%s) = %s (%v), %v", prec, got, par, err)
					}
					out := make([]float32, tc.batch*rgc.NumClasses)
					b.ReportAllocs()
					cpu0 := processCPU()
					for b.Loop() {
						if err := e.Predict(batch, out); err != nil {
							b.Fatal(err)
						}
					}
					cpu := processCPU() - cpu0
					windows := float64(b.N * tc.batch)
					b.ReportMetric(1e3*b.Elapsed().Seconds()/float64(b.N), "ms/batch")
					b.ReportMetric(1e3*cpu/windows, "cpu-ms/window")
				})
			}
		}
	}
}
