package sgemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkGemmTrans measures the transposed cases the training graph uses
// (convolution backward passes) at a typical shape.
func BenchmarkGemmTrans(b *testing.B) {
	const m, n, k = 128, 896, 512
	rng := rand.New(rand.NewPCG(1, 1))
	x := randSlice(rng, m*k)
	y := randSlice(rng, k*n)
	z := make([]float32, m*n)
	flops := 2.0 * m * n * k
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		tA, tB := tr[0], tr[1]
		lda, ldb := k, n
		if tA {
			lda = m
		}
		if tB {
			ldb = k
		}
		b.Run(fmt.Sprintf("tA=%v/tB=%v", tA, tB), func(b *testing.B) {
			c0 := processCPU()
			for b.Loop() {
				Gemm(tA, tB, m, n, k, 1, x, lda, y, ldb, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/(processCPU()-c0)/1e9, "GFLOP/cpu-s")
		})
	}
}
