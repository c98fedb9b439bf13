package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestBetaZeroDoesNotReadC checks BLAS's beta 0: C is written, never read,
// so NaNs and infinities in the old C do not reach the result, which must
// equal alpha*op(A)*op(B) within tol(k). It runs every kernel this CPU
// has (the first k block's store in the packed and in the strided
// kernels, and in the edge tiles), every entry point (Gemm split over
// workers, GemmWork, GemmPacked with A in place or packed, with the fused
// ReLU), one and two k blocks (the second accumulates on what the first
// stored), more columns than the zero row GemmPacked stores with, alpha 0
// and k 0; the floats of C's rows past n keep their old bits.
func TestBetaZeroDoesNotReadC(t *testing.T) {
	type shape struct{ m, n, k int }
	shapes := []shape{{6, 16, 8}, {13, 37, 29}, {50, 70, kcBlock + 44}, {7, ncBlock + 40, 9}, {5, 9, 0}}
	type entry struct {
		name string
		relu bool
		run  func(tA, tB bool, s shape, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int)
	}
	entries := []entry{
		{"Gemm/1", false, func(tA, tB bool, s shape, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
			GemmParallel(1, tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, 0, c, ldc)
		}},
		{"Gemm/3", false, func(tA, tB bool, s shape, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
			GemmParallel(3, tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, 0, c, ldc)
		}},
		{"GemmWork", false, func(tA, tB bool, s shape, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
			GemmWork(make([]float32, GemmWorkSize()), tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, 0, c, ldc)
		}},
		{"GemmPacked", false, func(tA, tB bool, s shape, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
			GemmPacked(tA, s.m, alpha, a, lda, NewPackedB(tB, s.k, s.n, b, ldb), 0, c, ldc, make([]float32, WorkSize()))
		}},
		{"GemmPackedReLU", true, func(tA, tB bool, s shape, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
			GemmPackedReLU(tA, s.m, alpha, a, lda, NewPackedB(tB, s.k, s.n, b, ldb), 0, c, ldc, make([]float32, WorkSize()))
		}},
	}
	orig := kern
	defer func() { kern = orig }()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, spec := range availableKernels() {
		kern = spec
		for _, s := range shapes {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, alpha := range []float32{1, -2, 0} {
					tA, tB := tr[0], tr[1]
					ar, ac, br, bc := storedShapes(tA, tB, s.m, s.n, s.k)
					lda, ldb, ldc := ac+1, bc+2, s.n+3
					a := randSlice(rng, max(ar*lda, 1))
					b := randSlice(rng, max(br*ldb, 1))
					want := naive(tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, 0, make([]float32, s.m*ldc), ldc)
					old := make([]float32, s.m*ldc)
					for i := range old {
						switch i % 3 {
						case 0:
							old[i] = float32(math.NaN())
						case 1:
							old[i] = float32(math.Inf(1))
						default:
							old[i] = float32(math.Inf(-1))
						}
					}
					for _, e := range entries {
						name := fmt.Sprintf("%s/%s/%dx%dx%d/tA=%v/tB=%v/alpha=%v", spec.name, e.name, s.m, s.n, s.k, tA, tB, alpha)
						got := append([]float32(nil), old...)
						e.run(tA, tB, s, alpha, a, lda, b, ldb, got, ldc)
						for i := 0; i < s.m; i++ {
							for j := 0; j < ldc; j++ {
								g, w := got[i*ldc+j], want[i*ldc+j]
								if j >= s.n {
									if math.Float32bits(g) != math.Float32bits(old[i*ldc+j]) {
										t.Fatalf("%s: C[%d,%d] past n written: %v", name, i, j, g)
									}
									continue
								}
								if e.relu {
									w = max(w, 0)
								}
								if d := math.Abs(float64(g) - float64(w)); !(d <= tol(s.k)) {
									t.Fatalf("%s: C[%d,%d] = %v, want %v", name, i, j, g, w)
								}
							}
						}
					}
				}
			}
		}
	}
}
