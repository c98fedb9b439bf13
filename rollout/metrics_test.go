package rollout

import (
	"math"
	"testing"
)

// unit returns a train of n bins with a count of 1 at each listed bin.
func unit(n int, bins ...int) []float64 {
	x := make([]float64, n)
	for _, b := range bins {
		x[b]++
	}
	return x
}

// gauss is the normalised kernel of tau bins written out independently:
// g(m) = exp(-m^2 / (2 tau^2)) / Z on -R..R, R = round(4 tau), 0 outside.
func gauss(tau float64) func(m int) float64 {
	r := int(math.Round(4 * tau))
	var z float64
	for m := -r; m <= r; m++ {
		z += math.Exp(-float64(m*m) / (2 * tau * tau))
	}
	return func(m int) float64 {
		if m < -r || m > r {
			return 0
		}
		return math.Exp(-float64(m*m)/(2*tau*tau)) / z
	}
}

// naiveSmooth is a dense reference convolution: every output bin sums over
// every kernel offset, reading beyond the ends as 0 or by folding the index
// back (i<0 -> -1-i, i>=n -> 2n-1-i) until it lands inside.
func naiveSmooth(x []float64, tau float64, reflect bool) []float64 {
	g := gauss(tau)
	r := int(math.Round(4 * tau))
	n := len(x)
	out := make([]float64, n)
	for j := range out {
		for m := -r; m <= r; m++ {
			i := j - m
			if !reflect && (i < 0 || i >= n) {
				continue
			}
			for i < 0 || i >= n {
				if i < 0 {
					i = -1 - i
				} else {
					i = 2*n - 1 - i
				}
			}
			out[j] += g(m) * x[i]
		}
	}
	return out
}

// naiveVR is the Van Rossum distance summed explicitly:
// f[i] = sum_{j<=i} (a[j]-b[j]) exp(-(i-j)/tau).
func naiveVR(a, b []float64, tau float64) float64 {
	var sum float64
	for i := range a {
		var f float64
		for j := 0; j <= i; j++ {
			f += (a[j] - b[j]) * math.Exp(-float64(i-j)/tau)
		}
		sum += f * f
	}
	return math.Sqrt(2 / tau * sum)
}

func naivePearson(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

func naiveCos(x, y []float64) float64 {
	var xy, xx, yy float64
	for i := range x {
		xy += x[i] * y[i]
		xx += x[i] * x[i]
		yy += y[i] * y[i]
	}
	return xy / math.Sqrt(xx*yy)
}

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

func TestTau(t *testing.T) {
	tau, err := Tau(DefaultSigmaMs, DefaultBinMs)
	if err != nil || !near(tau, 60/1.0082, 1e-15) {
		t.Fatalf("Tau(60, 1.0082) = %v, %v; want 59.5120", tau, err)
	}
	if tau, _ := Tau(0.1, 1); tau != MinTau {
		t.Errorf("Tau(0.1, 1) = %v, want the floor %v", tau, MinTau)
	}
	for _, bad := range [][2]float64{{0, 1}, {-1, 1}, {60, 0}, {math.NaN(), 1}, {60, math.Inf(1)}} {
		if _, err := Tau(bad[0], bad[1]); err == nil {
			t.Errorf("Tau(%v, %v): no error", bad[0], bad[1])
		}
	}
}

func TestGaussianKernel(t *testing.T) {
	for _, tc := range []struct {
		tau    float64
		radius int
	}{{0.25, 1}, {1, 4}, {1.1, 4}, {1.125, 5}, {60 / 1.0082, 238}} {
		k := GaussianKernel(tc.tau)
		if len(k) != 2*tc.radius+1 {
			t.Errorf("tau %v: %d taps, want radius %d", tc.tau, len(k), tc.radius)
			continue
		}
		var sum float64
		for i, v := range k {
			sum += v
			if k[len(k)-1-i] != v {
				t.Errorf("tau %v: kernel not symmetric at %d", tc.tau, i)
			}
		}
		if !near(sum, 1, 1e-14) {
			t.Errorf("tau %v: kernel sums to %v", tc.tau, sum)
		}
		// Ratio of neighbouring taps is exp(-(2m+1)/(2 tau^2)).
		r := tc.radius
		if r >= 1 && !near(k[r+1]/k[r], math.Exp(-1/(2*tc.tau*tc.tau)), 1e-12) {
			t.Errorf("tau %v: k[1]/k[0] = %v", tc.tau, k[r+1]/k[r])
		}
	}
}

// TestVanRossumOneSpike: one spike in the first bin against none, over n
// bins, is D^2 = (2/tau) * sum_{i<n} exp(-2i/tau)
// = (2/tau) (1 - exp(-2n/tau)) / (1 - exp(-2/tau)). At the default
// tau = 60/1.0082 = 59.512 bins and n = 10000 this is D = 1.0084139...
// ("about 1"; the excess over 1 is about 1/(2 tau) from summing whole bins).
func TestVanRossumOneSpike(t *testing.T) {
	tau := 60 / 1.0082
	n := 10000
	want := math.Sqrt(2 / tau * (1 - math.Exp(-2*float64(n)/tau)) / (1 - math.Exp(-2/tau)))
	got := VanRossum(unit(n, 0), unit(n), tau)
	if !near(got, want, 1e-12) {
		t.Errorf("one spike vs none: %v, want %v", got, want)
	}
	if math.Abs(got-1.0084139) > 1e-6 {
		t.Errorf("one spike vs none: %.9f, want 1.0084139", got)
	}
	// Symmetric, and the same for a spike placed anywhere far from the end.
	if d := VanRossum(unit(n), unit(n, 100), tau); !near(d, want, 1e-9) {
		t.Errorf("none vs spike at 100: %v, want %v", d, want)
	}
	// A spike 10 bins before the end only decays over 10 bins:
	// D^2 = (2/tau)(1-exp(-20/tau))/(1-exp(-2/tau)).
	wantEnd := math.Sqrt(2 / tau * (1 - math.Exp(-20/tau)) / (1 - math.Exp(-2/tau)))
	if d := VanRossum(unit(n, n-10), unit(n), tau); !near(d, wantEnd, 1e-12) {
		t.Errorf("spike 10 bins before the end: %v, want %v", d, wantEnd)
	}
}

func TestMetricsHandComputed(t *testing.T) {
	const tau = 1.0 // sigma 1 ms at 1 ms bins: radius 4
	g := gauss(tau)
	e := math.Exp
	type want struct{ vr, schreiber, pearson float64 }
	cases := []struct {
		name string
		a, b []float64
		want want
	}{
		{"identical", unit(20, 3, 9, 10), unit(20, 3, 9, 10), want{0, 1, 1}},
		{"one spike vs none", unit(20, 5), unit(20),
			// D^2 = 2 * sum_{i=0}^{14} e^{-2i}; Schreiber and Pearson 0 by definition.
			want{math.Sqrt(2 * (1 - e(-30)) / (1 - e(-2))), 0, 0}},
		{"both empty", unit(20), unit(20), want{0, 0, 0}},
		{"shifted by 2", unit(20, 5), unit(20, 7),
			// f = e^{-i} for the 2 bins 5,6; then (e^{-2}-1) e^{-m} for m=0..12.
			want{
				math.Sqrt(2 * ((1 + e(-2)) + (1-e(-2))*(1-e(-2))*(1-e(-26))/(1-e(-2)))),
				// Both kernels are inside the train: the overlap
				// sum_m g(m) g(m-2) over sum_m g(m)^2.
				func() float64 {
					var num, den float64
					for m := -4; m <= 4; m++ {
						num += g(m) * g(m-2)
						den += g(m) * g(m)
					}
					return num / den
				}(),
				naivePearson(naiveSmooth(unit(20, 5), tau, true), naiveSmooth(unit(20, 7), tau, true)),
			}},
	}
	m, err := NewMetrics(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		s, err := m.Compare(tc.a, tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !near(s.VanRossum, tc.want.vr, 1e-12) || !near(s.Schreiber, tc.want.schreiber, 1e-12) ||
			!near(s.Pearson, tc.want.pearson, 1e-12) {
			t.Errorf("%s: got %+v, want %+v", tc.name, s, tc.want)
		}
	}
	// The shifted spike's Pearson, written out: the smoothed trains are g(j-5)
	// and g(j-7) on 20 bins (no edge involvement).
	x, y := make([]float64, 20), make([]float64, 20)
	for j := range x {
		x[j], y[j] = g(j-5), g(j-7)
	}
	s, _ := m.Compare(unit(20, 5), unit(20, 7))
	if !near(s.Pearson, naivePearson(x, y), 1e-12) || s.Pearson <= 0 || s.Pearson >= 1 {
		t.Errorf("shifted Pearson %v, want %v in (0,1)", s.Pearson, naivePearson(x, y))
	}
}

// TestEdges: a spike in the first or last bin. Zero padding keeps only the
// inner half of the kernel, g(j); reflection adds the mirrored spike at bin
// -1 (or n), g(j) + g(j+1), so the smoothed train keeps all of its mass.
func TestEdges(t *testing.T) {
	const tau, n = 1.0, 12
	g := gauss(tau)
	k := GaussianKernel(tau)
	zero, refl := make([]float64, n), make([]float64, n)
	for _, first := range []bool{true, false} {
		bin := 0
		if !first {
			bin = n - 1
		}
		x := unit(n, bin)
		SmoothZero(zero, x, k)
		SmoothReflect(refl, x, k)
		var mz, mr float64
		for j := 0; j < n; j++ {
			d := j // distance from the spike
			if !first {
				d = n - 1 - j
			}
			if !near(zero[j], g(d), 1e-15) {
				t.Errorf("first=%v zero padding bin %d: %v, want %v", first, j, zero[j], g(d))
			}
			if !near(refl[j], g(d)+g(d+1), 1e-15) {
				t.Errorf("first=%v reflection bin %d: %v, want %v", first, j, refl[j], g(d)+g(d+1))
			}
			mz += zero[j]
			mr += refl[j]
		}
		if !near(mr, 1, 1e-14) || !near(mz, 0.5+g(0)/2, 1e-14) {
			t.Errorf("first=%v masses: zero %v (want %v), reflect %v (want 1)", first, mz, 0.5+g(0)/2, mr)
		}
	}
	// Schreiber of a spike at the first bin against one at the last: the
	// zero-padded kernels of a 12-bin train do not overlap (radius 4).
	m, _ := NewMetrics(1, 1)
	s, _ := m.Compare(unit(n, 0), unit(n, n-1))
	if s.Schreiber != 0 {
		t.Errorf("Schreiber of spikes at both ends: %v, want 0", s.Schreiber)
	}
	// Pearson there: mirror images, hand-built from g(d)+g(d+1).
	x, y := make([]float64, n), make([]float64, n)
	for j := range x {
		x[j] = g(j) + g(j+1)
		y[j] = g(n-1-j) + g(n-j)
	}
	if want := naivePearson(x, y); !near(s.Pearson, want, 1e-12) || want >= 0 {
		t.Errorf("Pearson of spikes at both ends: %v, want %v (< 0)", s.Pearson, want)
	}
}

// TestAgainstNaive compares the sparse scatter implementation with the
// dense reference on random trains, including trains shorter than the
// kernel (repeated reflection) and non-integer counts.
func TestAgainstNaive(t *testing.T) {
	rng := uint64(12345)
	next := func() float64 { // xorshift, uniform in [0,1)
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return float64(rng>>11) / (1 << 53)
	}
	for _, tc := range []struct {
		n   int
		tau float64
	}{{3, 1}, {5, 2.5}, {40, 0.25}, {64, 3}, {200, 7.3}} {
		a, b := make([]float64, tc.n), make([]float64, tc.n)
		for i := range a {
			if next() < 0.2 {
				a[i] = 1
			}
			if next() < 0.2 {
				b[i] = math.Floor(next() * 3)
			}
		}
		a[0], b[tc.n-1] = 1, 0.5
		k := GaussianKernel(tc.tau)
		for _, reflect := range []bool{false, true} {
			got := make([]float64, tc.n)
			if reflect {
				SmoothReflect(got, a, k)
			} else {
				SmoothZero(got, a, k)
			}
			want := naiveSmooth(a, tc.tau, reflect)
			for j := range got {
				if !near(got[j], want[j], 1e-13) {
					t.Fatalf("n=%d tau=%v reflect=%v bin %d: %v, want %v", tc.n, tc.tau, reflect, j, got[j], want[j])
				}
			}
		}
		m, _ := NewMetrics(tc.tau, 1)
		s, err := m.Compare(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if w := naiveVR(a, b, tc.tau); !near(s.VanRossum, w, 1e-12) {
			t.Errorf("n=%d tau=%v: VR %v, want %v", tc.n, tc.tau, s.VanRossum, w)
		}
		if w := naiveCos(naiveSmooth(a, tc.tau, false), naiveSmooth(b, tc.tau, false)); !near(s.Schreiber, w, 1e-12) {
			t.Errorf("n=%d tau=%v: Schreiber %v, want %v", tc.n, tc.tau, s.Schreiber, w)
		}
		if w := naivePearson(naiveSmooth(a, tc.tau, true), naiveSmooth(b, tc.tau, true)); !near(s.Pearson, w, 1e-12) {
			t.Errorf("n=%d tau=%v: Pearson %v, want %v", tc.n, tc.tau, s.Pearson, w)
		}
		if Schreiber(a, b, tc.tau) != s.Schreiber || Pearson(a, b, tc.tau) != s.Pearson {
			t.Errorf("n=%d: the allocating helpers disagree with Compare", tc.n)
		}
	}
}

func TestCompareErrors(t *testing.T) {
	m, _ := NewMetrics(60, 1)
	for _, tc := range []struct {
		name string
		a, b []float64
	}{
		{"length mismatch", unit(3), unit(4)},
		{"empty", nil, nil},
		{"NaN", []float64{0, math.NaN()}, unit(2)},
		{"Inf", unit(2), []float64{math.Inf(1), 0}},
	} {
		if _, err := m.Compare(tc.a, tc.b); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// A constant non-zero train correlates with nothing.
	if s, _ := m.Compare([]float64{1, 1, 1, 1}, unit(4, 1)); s.Pearson != 0 {
		t.Errorf("constant train: Pearson %v, want 0", s.Pearson)
	}
}

func TestCompareAllocs(t *testing.T) {
	m, _ := NewMetrics(60, rgcBinMsForTest)
	a, b := unit(5000, 10, 400, 2000, 4999), unit(5000, 12, 700, 3000)
	if _, err := m.Compare(a, b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(5, func() { _, _ = m.Compare(a, b) }); n != 0 {
		t.Errorf("Compare allocates %v times per call after warm-up", n)
	}
}

const rgcBinMsForTest = 1.0082

func BenchmarkCompare(b *testing.B) {
	m, _ := NewMetrics(60, rgcBinMsForTest)
	n := 80000
	x, y := make([]float64, n), make([]float64, n)
	for i := 0; i < n; i += 150 {
		x[i] = 1
		y[(i+37)%n] = 1
	}
	for b.Loop() {
		_, _ = m.Compare(x, y)
	}
}
