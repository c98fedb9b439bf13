package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lengths are the vector lengths tested: every tail up to 40, then long
// ones with tails of each size class.
var lengths = func() []int {
	var ns []int
	for n := 0; n <= 40; n++ {
		ns = append(ns, n)
	}
	return append(ns, 127, 1000, 4099)
}()

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	return v
}

// reluOut is a ReLU output: about half zeros.
func reluOut(rng *rand.Rand, n int) []float32 {
	v := randVec(rng, n, 1)
	for i := range v {
		v[i] = max(v[i], 0)
	}
	return v
}

// TestElementwiseMatchesPortable checks each element-wise routine (vector
// kernels where the CPU has them) against its portable loop bit for bit,
// at every length, writing out of place and, where allowed, in place.
func TestElementwiseMatchesPortable(t *testing.T) {
	const k, a, m, c = 0.83, -0.21, 0.3, 1.7
	for _, tc := range []struct {
		name       string
		fast, port func(d, x, y, o []float32)
	}{
		{"Add", func(d, x, y, _ []float32) { Add(d, x, y) }, func(d, x, y, _ []float32) { addGo(d, x, y) }},
		{"Add/in place", func(d, x, y, _ []float32) { copy(d, x); Add(d, d, y) }, func(d, x, y, _ []float32) { addGo(d, x, y) }},
		{"Mul", func(d, x, y, _ []float32) { Mul(d, x, y) }, func(d, x, y, _ []float32) { mulGo(d, x, y) }},
		{"Affine", func(d, x, _, _ []float32) { Affine(d, x, k, a) }, func(d, x, _, _ []float32) { affineGo(d, x, k, a) }},
		{"Affine/in place", func(d, x, _, _ []float32) { copy(d, x); Affine(d, d, k, a) }, func(d, x, _, _ []float32) { affineGo(d, x, k, a) }},
		{"AffineReLU", func(d, x, _, _ []float32) { AffineReLU(d, x, k, a) }, func(d, x, _, _ []float32) { affineReLUGo(d, x, k, a) }},
		{"MaskPos", func(d, x, _, o []float32) { MaskPos(d, x, o) }, func(d, x, _, o []float32) { maskPosGo(d, x, o) }},
		{"GateReLU", func(d, x, y, o []float32) { GateReLU(d, x, y, o) }, func(d, x, y, o []float32) { gateReLUGo(d, x, y, o) }},
		{"Norm", func(d, x, y, o []float32) { Norm(d, x, y, o, m, c) }, func(d, x, y, o []float32) { normGo(d, x, y, o, m, c) }},
		{"BNDx", func(d, x, y, _ []float32) { BNDx(d, x, y, k, a, m, c) }, func(d, x, y, _ []float32) { bnDxGo(d, x, y, k, a, m, c) }},
		{"BNDxPos", func(d, x, y, o []float32) { BNDxPos(d, x, y, o, k, a, m, c) }, func(d, x, y, o []float32) { bnDxPosGo(d, x, y, o, k, a, m, c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			for _, n := range lengths {
				// The inputs are one longer than the output: routines read
				// only len(d) elements.
				x, y, o := randVec(rng, n+1, 1), randVec(rng, n+1, 1), reluOut(rng, n+1)
				got, want := make([]float32, n), make([]float32, n)
				tc.fast(got, x, y, o)
				tc.port(want, x, y, o)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n %d element %d: %v, portable %v (x %v y %v o %v)", n, i, got[i], want[i], x[i], y[i], o[i])
					}
				}
			}
		})
	}
}

// TestReLUSpecialValues: AffineReLU and GateReLU clear negative results and
// pass NaN (a diverging run shows in its loss), +-Inf and -0, with the
// portable loops' bits, on the vector path and the tail.
func TestReLUSpecialValues(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negz := float32(math.Copysign(0, -1))
	x := []float32{nan, -1, 2, negz, 0, inf, -inf, -nan, nan, -3, 4, negz, inf, -inf, 0.5, -0.5, nan, -2}
	zero, ones := make([]float32, len(x)), make([]float32, len(x))
	for i := range ones {
		ones[i] = 1
	}
	for _, tc := range []struct {
		name       string
		fast, port func(y []float32)
	}{
		{"AffineReLU", func(y []float32) { AffineReLU(y, x, 1, negz) }, func(y []float32) { affineReLUGo(y, x, 1, negz) }},
		{"GateReLU", func(y []float32) { GateReLU(y, x, ones, zero) }, func(y []float32) { gateReLUGo(y, x, ones, zero) }},
	} {
		got, want := make([]float32, len(x)), make([]float32, len(x))
		tc.fast(got)
		tc.port(want)
		for i, v := range x {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s element %d (x %v): %v, portable %v", tc.name, i, v, got[i], want[i])
			}
			switch {
			case v != v:
				if got[i] == got[i] {
					t.Errorf("%s(NaN) = %v, want NaN", tc.name, got[i])
				}
			case v < 0:
				if got[i] != 0 {
					t.Errorf("%s(%v) = %v, want 0", tc.name, v, got[i])
				}
			case got[i] != v:
				t.Errorf("%s(%v) = %v", tc.name, v, got[i])
			}
		}
	}
}

// TestReductions checks the sums against float64 sums of the same terms:
// within 1e-6 of the sum of the terms' magnitudes (float32 sums in another
// order than the portable loops), and Max exactly.
func TestReductions(t *testing.T) {
	const m = 0.3
	for _, tc := range []struct {
		name string
		got  func(x, y, o []float32) float32
		term func(x, y, o float64) float64
	}{
		{"Sum", func(x, _, _ []float32) float32 { return Sum(x) }, func(x, _, _ float64) float64 { return x }},
		{"Dot", func(x, y, _ []float32) float32 { return Dot(x, y) }, func(x, y, _ float64) float64 { return x * y }},
		{"SumSqDev", func(x, _, _ []float32) float32 { return SumSqDev(x, m) }, func(x, _, _ float64) float64 { return (x - m) * (x - m) }},
		{"GradSums/g", func(x, y, _ []float32) float32 { s, _ := GradSums(x, y, m); return s }, func(x, _, _ float64) float64 { return x }},
		{"GradSums/gx", func(x, y, _ []float32) float32 { _, s := GradSums(x, y, m); return s }, func(x, y, _ float64) float64 { return x * (y - m) }},
		{"GradSumsPos/g", func(x, y, o []float32) float32 { s, _ := GradSumsPos(x, y, o, m); return s }, func(x, _, o float64) float64 { return x * b2f(o != 0) }},
		{"GradSumsPos/gx", func(x, y, o []float32) float32 { _, s := GradSumsPos(x, y, o, m); return s }, func(x, y, o float64) float64 { return x * (y - m) * b2f(o != 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			for _, n := range lengths {
				x, y, o := randVec(rng, n, 1), randVec(rng, n, 1), reluOut(rng, n)
				var ref, mag float64
				for i := range x {
					v := tc.term(float64(x[i]), float64(y[i]), float64(o[i]))
					ref += v
					mag += math.Abs(v)
				}
				if got := tc.got(x, y, o); math.Abs(float64(got)-ref) > 1e-6*mag {
					t.Fatalf("n %d: %v, want %v (terms' magnitudes %v)", n, got, ref, mag)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range lengths[1:] {
		x := randVec(rng, n, 1)
		if got, want := Max(x), maxGo(x); got != want {
			t.Fatalf("n %d: Max %v, want %v", n, got, want)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestMatVecAdd checks x W + y against float64 at widths with and without
// the vector kernel (multiples of 8 and not), within 1e-6 of the terms'
// magnitudes.
func TestMatVecAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, sh := range []struct{ in, out int }{{1, 8}, {7, 16}, {33, 24}, {5, 13}, {64, 40}} {
		x, w, y := randVec(rng, sh.in, 1), randVec(rng, sh.in*sh.out, 1), randVec(rng, sh.out, 1)
		got := append([]float32(nil), y...)
		MatVecAdd(x, w, got)
		for j := range y {
			ref, mag := float64(y[j]), math.Abs(float64(y[j]))
			for i := range x {
				v := float64(x[i]) * float64(w[i*sh.out+j])
				ref += v
				mag += math.Abs(v)
			}
			if math.Abs(float64(got[j])-ref) > 1e-6*mag {
				t.Fatalf("%dx%d column %d: %v, want %v", sh.in, sh.out, j, got[j], ref)
			}
		}
	}
}

// ulps is the distance of got from the float64 value want in units of the
// float32 spacing at want.
func ulps(got float32, want float64) float64 {
	w := float32(want)
	ulp := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
	return math.Abs(float64(got)-want) / ulp
}

// TestExpf checks the scalar exponential against math.Exp over [-90, 90]:
// within 3e-7 relative in the normal range, 1e-44 absolute below it, +Inf
// above float32's range, NaN for NaN.
func TestExpf(t *testing.T) {
	var worst float64
	for x := float32(-90); x <= 90; x += 0.0137 {
		want := math.Exp(float64(x))
		got := float64(Expf(x))
		switch {
		case want > math.MaxFloat32:
			if !math.IsInf(got, 1) {
				t.Fatalf("Expf(%v) = %v, want +Inf", x, got)
			}
		case want < 1e-37:
			if math.Abs(got-want) > 1e-44 {
				t.Fatalf("Expf(%v) = %v, want %v", x, got, want)
			}
		default:
			worst = math.Max(worst, math.Abs(got-want)/want)
		}
	}
	if worst > 3e-7 {
		t.Errorf("Expf worst relative error %g > 3e-7", worst)
	}
	if v := Expf(float32(math.NaN())); v == v {
		t.Errorf("Expf(NaN) = %v", v)
	}
}

// expMaxULP is Exp's error bound against math.Exp on [-87, 87], in float32
// ulps at the exact value (worst measured on a grid of step 0.000731: 0.88
// for the AVX2 kernel, 1.15 for the portable loop; a correctly rounded
// result is within 0.5).
const expMaxULP = 1.5

// TestExp checks Exp (vector kernel and tails) against math.Exp on a dense
// grid and at random points of [-87, 87], the range it serves (softmax
// arguments <= 0, GELU's clamped 2u): within expMaxULP ulps; arguments
// below -87 give e^-87.
func TestExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var xs []float32
	for x := float32(-87); x <= 87; x += 0.00731 {
		xs = append(xs, x)
	}
	for range 200_000 {
		xs = append(xs, float32(-87+174*rng.Float64()))
	}
	for _, n := range []int{len(xs), 7} { // the kernel, then the portable tail
		e := append([]float32(nil), xs[:n]...)
		Exp(e)
		var worst float64
		for i, x := range xs[:n] {
			u := ulps(e[i], math.Exp(float64(x)))
			if u > expMaxULP {
				t.Fatalf("Exp(%v) = %v, want %v (%.2f ulp)", x, e[i], math.Exp(float64(x)), u)
			}
			worst = max(worst, u)
		}
		t.Logf("%d values: worst %.2f ulp", n, worst)
	}
	low := []float32{-100, -88, -1e30, float32(math.Inf(-1)), -100, -88, -1e30, float32(math.Inf(-1)), -300}
	Exp(low)
	for i, v := range low {
		if v != Expf(-87) {
			t.Errorf("Exp below -87, element %d: %v, want e^-87 = %v", i, v, Expf(-87))
		}
	}
}

// geluRef is GELU's tanh form and its derivative in float64.
func geluRef(x float64) (y, d float64) {
	c := math.Sqrt(2 / math.Pi)
	t := math.Tanh(c * (x + GELUCubic*x*x*x))
	y = 0.5 * x * (1 + t)
	d = 0.5*(1+t) + 0.5*x*(1-t*t)*c*(1+3*GELUCubic*x*x)
	return y, d
}

// geluTol is the tolerance of Gelu and GeluDeriv against float64 at x:
// 3e-7 (1 + |x|) for the value and the derivative alike (worst measured:
// 1e-7 (1 + |x|)).
func geluTol(x float64) float64 { return 3e-7 * (1 + math.Abs(x)) }

// TestGelu checks Gelu and GeluDeriv (vector kernels and tails) against the
// float64 definitions over [-12, 12] and at +-100 and tiny arguments,
// within geluTol; GeluDeriv's value and Gelu's agree to geluTol too.
func TestGelu(t *testing.T) {
	var xs []float32
	for x := float32(-12); x <= 12; x += 0.00731 {
		xs = append(xs, x)
	}
	xs = append(xs, 0, -100, 100, 1e-30, -1e-30, -87, 87)
	for _, n := range []int{len(xs), 5} {
		g := append([]float32(nil), xs[:n]...)
		Gelu(g)
		y, d := make([]float32, n), make([]float32, n)
		GeluDeriv(y, d, xs)
		for i, x := range xs[:n] {
			wy, wd := geluRef(float64(x))
			tol := geluTol(float64(x))
			if math.Abs(float64(g[i])-wy) > tol || math.Abs(float64(y[i])-wy) > tol || math.Abs(float64(d[i])-wd) > tol {
				t.Fatalf("x %v: Gelu %v, GeluDeriv %v and %v, want %v and %v", x, g[i], y[i], d[i], wy, wd)
			}
		}
	}
	checkGeluWide(t, xs)
}

// TestTranscendentalLengths checks Exp, Gelu and GeluDeriv at every
// length (kernel and tail split) on random arguments of [-10, 10], against
// float64 within expMaxULP and geluTol.
func TestTranscendentalLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range lengths {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(-10 + 20*rng.Float64())
		}
		e, g := append([]float32(nil), x...), append([]float32(nil), x...)
		y, d := make([]float32, n), make([]float32, n)
		Exp(e)
		Gelu(g)
		GeluDeriv(y, d, x)
		for i, v := range x {
			if u := ulps(e[i], math.Exp(float64(v))); u > expMaxULP {
				t.Fatalf("n %d element %d: Exp(%v) = %v, %.2f ulp", n, i, v, e[i], u)
			}
			wy, wd := geluRef(float64(v))
			tol := geluTol(float64(v))
			if math.Abs(float64(g[i])-wy) > tol || math.Abs(float64(y[i])-wy) > tol || math.Abs(float64(d[i])-wd) > tol {
				t.Fatalf("n %d element %d, x %v: Gelu %v, GeluDeriv %v and %v, want %v and %v", n, i, v, g[i], y[i], d[i], wy, wd)
			}
		}
	}
}

// TestPortableGelu checks the portable loops alone against float64 (on
// amd64 the tests above exercise them on tails only).
func TestPortableGelu(t *testing.T) {
	var xs []float32
	for x := float32(-12); x <= 12; x += 0.0173 {
		xs = append(xs, x)
	}
	g := append([]float32(nil), xs...)
	geluGo(g)
	y, d := make([]float32, len(xs)), make([]float32, len(xs))
	geluDerivGo(y, d, xs)
	e := append([]float32(nil), xs...)
	expGo(e)
	for i, x := range xs {
		wy, wd := geluRef(float64(x))
		tol := geluTol(float64(x))
		if math.Abs(float64(g[i])-wy) > tol || math.Abs(float64(y[i])-wy) > tol || math.Abs(float64(d[i])-wd) > tol {
			t.Fatalf("x %v: geluGo %v, geluDerivGo %v and %v, want %v and %v", x, g[i], y[i], d[i], wy, wd)
		}
		if u := ulps(e[i], math.Exp(float64(x))); u > expMaxULP {
			t.Fatalf("expGo(%v) = %v: %.2f ulp", x, e[i], u)
		}
	}
}

// TestNothingAllocates: the routines allocate nothing.
func TestNothingAllocates(t *testing.T) {
	x, y, o, d := make([]float32, 1000), make([]float32, 1000), make([]float32, 1000), make([]float32, 1000)
	if n := testing.AllocsPerRun(10, func() {
		GeluDeriv(d, y, x)
		Exp(d)
		Add(d, x, y)
		BNDxPos(d, x, y, o, 1, 2, 3, 4)
		GradSumsPos(x, y, o, 1)
		Sum(x)
	}); n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}

// BenchmarkGelu is GELU over one gpt-b layer's MLP activations (64 tokens
// of 512), in place, and with its derivative (ns per value in ns/value).
func BenchmarkGelu(b *testing.B) {
	x := make([]float32, 64*512)
	for i := range x {
		x[i] = float32(i%97)/16 - 3
	}
	y, d := make([]float32, len(x)), make([]float32, len(x))
	b.Run("inplace", func(b *testing.B) {
		for b.Loop() {
			copy(y, x)
			Gelu(y)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/value")
	})
	b.Run("deriv", func(b *testing.B) {
		for b.Loop() {
			GeluDeriv(y, d, x)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/value")
	})
}
