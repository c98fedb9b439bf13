package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// naive is the reference: a triple loop in float64.
func naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float32 {
	out := append([]float32(nil), c...)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
	return out
}

func randSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

type shape struct{ m, n, k int }

var shapes = []shape{
	{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {3, 3, 0}, {0, 4, 4}, {4, 0, 2},
	{4, 4, 4}, {12, 32, 17}, {13, 33, 19}, {11, 31, 5}, {6, 16, 8}, {7, 17, 9},
	{25, 70, 300}, {97, 45, 257}, {128, 128, 896}, {200, 1600, 40}, {64, 64, 64},
}

// tolerance: float32 accumulation over k terms of unit-normal products has
// error ~ k * 2^-24 * sqrt(k); we allow 1e-5 * (k+1) relative to the scale
// sqrt(k) of the sum.
func tol(k int) float64 { return 1e-5 * float64(k+1) * math.Sqrt(float64(k)+1) }

func TestGemmMatchesNaive(t *testing.T) {
	name, mr, nr := Kernel()
	t.Logf("kernel %s %dx%d", name, mr, nr)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
				tA, tB := tr[0], tr[1]
				alpha, beta := ab[0], ab[1]
				// Leading dimensions with padding to catch stride bugs.
				ar, ac, br, bc := storedShapes(tA, tB, s.m, s.n, s.k)
				lda, ldb, ldc := ac+3, bc+1, s.n+2
				a := randSlice(rng, ar*lda+1)
				b := randSlice(rng, br*ldb+1)
				c := randSlice(rng, s.m*ldc+1)
				want := naive(tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c, ldc)
				for _, workers := range []int{1, 2, 3} {
					got := append([]float32(nil), c...)
					GemmParallel(workers, tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, got, ldc)
					if err := compare(got, want, tol(s.k)); err != nil {
						t.Fatalf("m=%d n=%d k=%d tA=%v tB=%v alpha=%v beta=%v workers=%d: %v", s.m, s.n, s.k, tA, tB, alpha, beta, workers, err)
					}
				}
				got := append([]float32(nil), c...)
				GemmWork(make([]float32, GemmWorkSize()), tA, tB, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, got, ldc)
				if err := compare(got, want, tol(s.k)); err != nil {
					t.Fatalf("GemmWork m=%d n=%d k=%d tA=%v tB=%v: %v", s.m, s.n, s.k, tA, tB, err)
				}
				if !tB {
					got := append([]float32(nil), c...)
					pb := NewPackedB(false, s.k, s.n, b, ldb)
					GemmPacked(tA, s.m, alpha, a, lda, pb, beta, got, ldc, make([]float32, WorkSize()))
					if err := compare(got, want, tol(s.k)); err != nil {
						t.Fatalf("packed m=%d n=%d k=%d tA=%v: %v", s.m, s.n, s.k, tA, err)
					}
				}
			}
		}
	}
}

// storedShapes returns the rows and columns of A and B as stored for
// op(A) m x k and op(B) k x n.
func storedShapes(tA, tB bool, m, n, k int) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if tA {
		ar, ac = k, m
	}
	if tB {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

func compare(got, want []float32, tol float64) error {
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol || math.IsNaN(float64(got[i])) {
			return fmt.Errorf("element %d: got %v want %v (|diff| %g > %g)", i, got[i], want[i], d, tol)
		}
	}
	return nil
}

// TestGemmPackedOverlappingRows checks the im2col-free convolution use: rows
// of A overlap (lda < k).
func TestGemmPackedOverlappingRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const in, kw, stride, out, L = 5, 21, 2, 16, 40
	k := in * kw
	m := L
	x := randSlice(rng, (m-1)*stride*in+k)
	w := randSlice(rng, k*out)
	c := make([]float32, m*out)
	want := make([]float32, m*out)
	for i := 0; i < m; i++ {
		for j := 0; j < out; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(x[i*stride*in+p]) * float64(w[p*out+j])
			}
			want[i*out+j] = float32(s)
		}
	}
	GemmPacked(false, m, 1, x, stride*in, NewPackedB(false, k, out, w, out), 0, c, out, make([]float32, WorkSize()))
	if err := compare(c, want, tol(k)); err != nil {
		t.Fatal(err)
	}
}

func TestGemmPackedReLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range []shape{{30, 70, 600}, {12, 32, 4}, {5, 3, 2}, {7, 9, 0}} {
		for _, alpha := range []float32{1, -0.5} {
			a := randSlice(rng, s.m*s.k+1)
			b := randSlice(rng, s.k*s.n+1)
			c := randSlice(rng, s.m*s.n)
			want := naive(false, false, s.m, s.n, s.k, alpha, a, s.k, b, s.n, 0.5, c, s.n)
			for i := range want {
				want[i] = max(want[i], 0)
			}
			GemmPackedReLU(false, s.m, alpha, a, s.k, NewPackedB(false, s.k, s.n, b, s.n), 0.5, c, s.n, make([]float32, WorkSize()))
			if err := compare(c, want, tol(s.k)); err != nil {
				t.Errorf("m=%d n=%d k=%d alpha=%v: %v", s.m, s.n, s.k, alpha, err)
			}
		}
	}
}

// checkBias compares GemmPackedBias with the naive product plus bias (and
// ReLU), starting from a C full of garbage that must not leak in.
func checkBias(rng *rand.Rand, m, n, k int, relu bool) error {
	a := randSlice(rng, m*k+1)
	b := randSlice(rng, k*n)
	bias := randSlice(rng, n)
	zero := make([]float32, m*n)
	want := naive(false, false, m, n, k, 1, a, k, b, n, 0, zero, n)
	for i := range want {
		want[i] += bias[i%n]
		if relu {
			want[i] = max(want[i], 0)
		}
	}
	c := randSlice(rng, m*n)
	for i := range c {
		c[i] *= 1e6
	}
	GemmPackedBias(m, a, k, NewPackedB(false, k, n, b, n), bias, relu, c, n, make([]float32, WorkSize()))
	if err := compare(c, want, tol(k)); err != nil {
		return fmt.Errorf("GemmPackedBias m=%d n=%d k=%d relu=%v: %w", m, n, k, relu, err)
	}
	return nil
}

func TestGemmPackedBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, s := range []shape{{64, 128, 896}, {37, 41, 600}, {512, 16, 336}, {5, 8, 3}, {12, 32, 256}, {13, 81, 64}, {4, 4, 0}} {
		for _, relu := range []bool{false, true} {
			if err := checkBias(rng, s.m, s.n, s.k, relu); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestKernelsAgree(t *testing.T) {
	// Every kernel this CPU can run must match the generic one.
	rng := rand.New(rand.NewPCG(5, 6))
	orig := kern
	defer func() { kern = orig }()
	for _, spec := range availableKernels() {
		kern = spec
		// Row counts that leave every remainder for the edge kernels.
		for _, m := range []int{37, 40, 44, 46, 12, 6} {
			a := randSlice(rng, m*53)
			b := randSlice(rng, 53*41)
			c := randSlice(rng, m*41)
			want := naive(false, false, m, 41, 53, 1, a, 53, b, 41, 1, c, 41)
			c2 := append([]float32(nil), c...)
			Gemm(false, false, m, 41, 53, 1, a, 53, b, 41, 1, c, 41)
			if err := compare(c, want, tol(53)); err != nil {
				t.Errorf("kernel %s m=%d: %v", spec.name, m, err)
			}
			// Strided (unpacked A) kernels with the fused ReLU; n=64 so
			// that full-width tiles reach the edge kernels, n=16 and 8 for
			// the narrow kernels.
			for _, n := range []int{64, 16, 8, 41} {
				bn := randSlice(rng, 53*n)
				c2 = randSlice(rng, m*n)
				want = naive(false, false, m, n, 53, 1, a, 53, bn, n, 1, c2, n)
				GemmPackedReLU(false, m, 1, a, 53, NewPackedB(false, 53, n, bn, n), 1, c2, n, make([]float32, WorkSize()))
				for i := range want {
					want[i] = max(want[i], 0)
				}
				if err := compare(c2, want, tol(53)); err != nil {
					t.Errorf("kernel %s m=%d n=%d, strided ReLU: %v", spec.name, m, n, err)
				}
				if err := checkBias(rng, m, n, 53, true); err != nil {
					t.Errorf("kernel %s: %v", spec.name, err)
				}
			}
		}
	}
}

func TestGemmPackedAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	a := randSlice(rng, 100*300)
	pb := NewPackedB(false, 300, 70, randSlice(rng, 300*70), 70)
	c := make([]float32, 100*70)
	work := make([]float32, WorkSize())
	allocs := testing.AllocsPerRun(10, func() {
		GemmPacked(false, 100, 1, a, 300, pb, 0, c, 70, work)
	})
	if allocs != 0 {
		t.Errorf("GemmPacked: %v allocations per call, want 0", allocs)
	}
	gw := make([]float32, GemmWorkSize())
	b := randSlice(rng, 300*70)
	allocs = testing.AllocsPerRun(10, func() {
		GemmWork(gw, false, true, 100, 70, 300, 1, a, 300, b, 300, 0, c, 70)
	})
	if allocs != 0 {
		t.Errorf("GemmWork: %v allocations per call, want 0", allocs)
	}
}

func TestGemmPanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Gemm with a short A did not panic")
		}
	}()
	Gemm(false, false, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
}

var benchSizes = []int{64, 128, 256, 512}

func BenchmarkGemm(b *testing.B) {
	name, _, _ := Kernel()
	for _, n := range benchSizes {
		rng := rand.New(rand.NewPCG(1, 1))
		x, y, z := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
		flops := 2 * float64(n) * float64(n) * float64(n)
		b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flops*float64(b.N)/(processCPU()-cpu0)/1e9, "GFLOP/cpu-s")
		})
		b.Run(fmt.Sprintf("parallel2/%d", n), func(b *testing.B) {
			for b.Loop() {
				GemmParallel(2, false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("gonum/%d", n), func(b *testing.B) {
			A := blas32.General{Rows: n, Cols: n, Stride: n, Data: x}
			B := blas32.General{Rows: n, Cols: n, Stride: n, Data: y}
			C := blas32.General{Rows: n, Cols: n, Stride: n, Data: z}
			cpu0 := processCPU()
			for b.Loop() {
				blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, A, B, 0, C)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flops*float64(b.N)/(processCPU()-cpu0)/1e9, "GFLOP/cpu-s")
		})
		if n <= 256 {
			b.Run(fmt.Sprintf("naive/%d", n), func(b *testing.B) {
				cpu0 := processCPU()
				for b.Loop() {
					naiveLoop(n, x, y, z)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flops*float64(b.N)/(processCPU()-cpu0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}

// naiveLoop is the plain i-k-j triple loop in float32, the speed baseline.
func naiveLoop(n int, a, b, c []float32) {
	clear(c)
	for i := 0; i < n; i++ {
		ci := c[i*n : i*n+n]
		for p := 0; p < n; p++ {
			av := a[i*n+p]
			bp := b[p*n : p*n+n]
			for j := range ci {
				ci[j] += av * bp[j]
			}
		}
	}
}

// BenchmarkGemmPackedConv runs the shapes of the paper CNN's convolutions as
// the engine calls them (A read in place with overlapping rows, B packed),
// next to Gemm on the same shapes with an explicit im2col copy as the
// baseline.
func BenchmarkGemmPackedConv(b *testing.B) {
	for _, s := range []struct {
		name                     string
		lOut, cin, k, stride, co int
	}{
		{"block0.conv2", 256, 128, 7, 2, 128},
		{"block3.conv2", 64, 128, 7, 1, 128},
		{"stem.conv2", 512, 16, 21, 1, 16},
		{"block0.conv1", 512, 16, 1, 1, 128},
	} {
		rng := rand.New(rand.NewPCG(1, 1))
		K := s.k * s.cin
		x := randSlice(rng, (s.lOut-1)*s.stride*s.cin+K)
		pb := NewPackedB(false, K, s.co, randSlice(rng, K*s.co), s.co)
		c := make([]float32, s.lOut*s.co)
		work := make([]float32, WorkSize())
		flops := 2 * float64(s.lOut) * float64(s.co) * float64(K)
		b.Run(s.name+"/packed", func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				GemmPackedReLU(false, s.lOut, 1, x, s.stride*s.cin, pb, 0, c, s.co, work)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flops*float64(b.N)/(processCPU()-cpu0)/1e9, "GFLOP/cpu-s")
		})
	}
}

// TestPackBIntoReuses checks that PackBInto packs as NewPackedB does when it
// reuses a larger matrix's storage (the panels past the new n are cleared),
// and that repacking into storage large enough allocates nothing.
func TestPackBIntoReuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	big := make([]float32, 300*70)
	for i := range big {
		big[i] = float32(rng.NormFloat64())
	}
	p := NewPackedB(false, 300, 70, big, 70)
	for _, tc := range []struct {
		trans bool
		k, n  int
	}{{false, 300, 70}, {true, 37, 19}, {false, 5, 3}, {true, 290, 33}} {
		b := make([]float32, tc.k*tc.n)
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		ld := tc.n
		if tc.trans {
			ld = tc.k
		}
		want := NewPackedB(tc.trans, tc.k, tc.n, b, ld)
		if q := PackBInto(p, tc.trans, tc.k, tc.n, b, ld); q != p {
			t.Fatalf("%v: PackBInto returned a new matrix, want its argument", tc)
		}
		if p.K() != tc.k || p.N() != tc.n || len(p.data) != len(want.data) {
			t.Fatalf("%v: packed %d x %d (%d floats), want %d x %d (%d)", tc, p.K(), p.N(), len(p.data), tc.k, tc.n, len(want.data))
		}
		for i := range want.data {
			if p.data[i] != want.data[i] {
				t.Fatalf("%v: packed[%d] = %g, want %g", tc, i, p.data[i], want.data[i])
			}
		}
		if n := testing.AllocsPerRun(3, func() { PackBInto(p, tc.trans, tc.k, tc.n, b, ld) }); n != 0 {
			t.Errorf("%v: %.0f allocations repacking, want 0", tc, n)
		}
	}
}
