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

// BenchmarkKernels runs a 256^3 product with every kernel this CPU can run
// (AVX-512, AVX2, generic Go), as the engine calls it (packed B, A in
// place).
func BenchmarkKernels(b *testing.B) {
	const n = 256
	rng := rand.New(rand.NewPCG(1, 1))
	x, y, z := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
	orig := kern
	defer func() { kern = orig }()
	for _, spec := range availableKernels() {
		kern = spec
		pb := NewPackedB(false, n, n, y, n)
		work := make([]float32, WorkSize())
		b.Run(spec.name, func(b *testing.B) {
			c0 := processCPU()
			for b.Loop() {
				GemmPacked(false, n, 1, x, n, pb, 0, z, n, work)
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/(processCPU()-c0)/1e9, "GFLOP/cpu-s")
		})
	}
}
