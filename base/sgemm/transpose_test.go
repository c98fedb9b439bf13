package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// transposeNaive is the definition: B[j*ldb+i] = A[i*lda+j].
func transposeNaive(m, n int, a []float32, lda int, b []float32, ldb int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			b[j*ldb+i] = a[i*lda+j]
		}
	}
}

// transposes are the transposes under test: Transpose (AVX2 blocks where
// the CPU has them) and its portable body.
var transposes = []struct {
	name string
	f    func(m, n int, a []float32, lda int, b []float32, ldb int)
}{
	{"Transpose", Transpose},
	{"transposeGo", transposeGo},
}

// TestTransposeMatchesDefinition checks Transpose (AVX2 blocks where the
// CPU has them, Go on the portable build) and transposeGo bit for bit
// against the definition, over shapes that leave every row and column
// tail of the 8 x 8 blocks and of the Go tiles, strips wider than one
// AVX2 pass, leading dimensions wider than the matrices, and NaNs with
// payloads; every float of B outside the transpose, before, inside the
// rows past m and after, must keep its sentinel.
func TestTransposeMatchesDefinition(t *testing.T) {
	sizes := []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 131, 300}
	type shape struct{ m, n, padA, padB int }
	var shapes []shape
	for _, m := range sizes {
		for _, n := range sizes {
			shapes = append(shapes, shape{m, n, 0, 0}, shape{m, n, 5, 3})
		}
	}
	shapes = append(shapes, shape{8, 8, 8, 8}, shape{16, 24, 1, 17}, shape{1024, 24, 0, 40})
	rng := rand.New(rand.NewPCG(3, 4))
	sentinel := math.Float32frombits(0x7fc0dead)
	const guard = 19
	for _, fn := range transposes {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d/pad%d,%d", fn.name, s.m, s.n, s.padA, s.padB), func(t *testing.T) {
				lda, ldb := s.n+s.padA, s.m+s.padB
				a := randSlice(rng, max(s.m*lda, 1))
				for i := range a {
					if rng.IntN(8) == 0 {
						a[i] = math.Float32frombits(0x7f800001 + rng.Uint32N(1<<22)) // a signalling NaN's payload
					}
				}
				size := guard + max(s.n*ldb, 1) + guard
				got := make([]float32, size)
				want := make([]float32, size)
				for i := range got {
					got[i], want[i] = sentinel, sentinel
				}
				fn.f(s.m, s.n, a, lda, got[guard:], ldb)
				transposeNaive(s.m, s.n, a, lda, want[guard:], ldb)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("B element %d (from the guard): %#08x, want %#08x", i-guard,
							math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			})
		}
	}
}

// TestTransposePanicsOnShortSlices checks the argument checks: an A or a
// B too short for the stated shape, or a leading dimension narrower than
// a row, panics instead of reading or writing out of bounds.
func TestTransposePanicsOnShortSlices(t *testing.T) {
	cases := []struct {
		name        string
		m, n        int
		la, lda     int
		lb, ldb     int
		shouldPanic bool
	}{
		{"fits", 9, 10, 90, 10, 90, 9, false},
		{"A short", 9, 10, 89, 10, 90, 9, true},
		{"B short", 9, 10, 90, 10, 89, 9, true},
		{"lda narrow", 9, 10, 90, 9, 90, 9, true},
		{"ldb narrow", 9, 10, 90, 10, 90, 8, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); (r != nil) != c.shouldPanic {
					t.Fatalf("panic %v, want panic %v", r, c.shouldPanic)
				}
			}()
			Transpose(c.m, c.n, make([]float32, c.la), c.lda, make([]float32, c.lb), c.ldb)
		})
	}
}

// BenchmarkTranspose transposes the channels-last convolutions' windows
// ([C, L] to [L, C] and back, the paper CNN's and the cpu preset's shapes)
// with Transpose (AVX2 where the CPU has it) and transposeGo, in GB moved
// (read plus written) per CPU-second.
func BenchmarkTranspose(b *testing.B) {
	shapes := []struct{ m, n int }{{16, 1010}, {1010, 16}, {128, 250}, {250, 128}, {64, 64}}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range shapes {
		a := randSlice(rng, s.m*s.n)
		t := make([]float32, s.m*s.n)
		for _, fn := range transposes {
			b.Run(fmt.Sprintf("%dx%d/%s", s.m, s.n, fn.name), func(b *testing.B) {
				c0 := processCPU()
				for b.Loop() {
					fn.f(s.m, s.n, a, s.n, t, s.m)
				}
				b.ReportMetric(8*float64(s.m*s.n)*float64(b.N)/(processCPU()-c0)/1e9, "GB/cpu-s")
			})
		}
	}
}
