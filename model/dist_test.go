package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestCatProbsHandComputed(t *testing.T) {
	// exp(0), exp(ln 2), exp(ln 3) -> 1/6, 2/6, 3/6.
	out := make([]float32, 3)
	CatProbs([]float32{0, float32(math.Ln2), float32(math.Log(3))}, out)
	want := []float64{1.0 / 6, 2.0 / 6, 3.0 / 6}
	for i := range want {
		if math.Abs(float64(out[i])-want[i]) > 1e-6 {
			t.Errorf("p[%d] = %v, want %v", i, out[i], want[i])
		}
	}
	// Shift invariance: logits + 1000 give the same result.
	out2 := make([]float32, 3)
	CatProbs([]float32{1000, 1000 + float32(math.Ln2), 1000 + float32(math.Log(3))}, out2)
	for i := range out {
		if math.Abs(float64(out[i]-out2[i])) > 1e-4 {
			t.Errorf("shifted p[%d] = %v, want %v", i, out2[i], out[i])
		}
	}
}

func checkDist(t *testing.T, name string, p []float32) {
	t.Helper()
	var s float64
	for k, v := range p {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || float64(v) < ProbFloor*0.99 {
			t.Fatalf("%s: p[%d] = %v (want finite >= %g)", name, k, v, ProbFloor)
		}
		s += float64(v)
	}
	if math.Abs(s-1) > 1e-5 {
		t.Fatalf("%s: probabilities sum to %v", name, s)
	}
}

func TestCatProbsExtreme(t *testing.T) {
	inf := float32(math.Inf(1))
	cases := []struct {
		name   string
		logits []float32
		argmax int
	}{
		{"huge spread", []float32{-3e38, 3e38, 0}, 1},
		{"all equal huge", []float32{3e38, 3e38}, -1},
		{"plus inf", []float32{0, inf, 5}, 1},
		{"all minus inf", []float32{-inf, -inf, -inf}, -1},
		{"one class", []float32{7}, 0},
	}
	for _, c := range cases {
		p := make([]float32, len(c.logits))
		CatProbs(c.logits, p)
		checkDist(t, c.name, p)
		if c.argmax >= 0 && p[c.argmax] < 0.999 {
			t.Errorf("%s: p[%d] = %v, want ~1", c.name, c.argmax, p[c.argmax])
		}
	}
}

// refMass integrates the normal density of u = log tau over [lo, hi] with
// Simpson's rule: the slow reference for a log-normal's interval mass.
func refMass(mu, sigma, lo, hi float64) float64 {
	lo = math.Max(lo, mu-14*sigma)
	hi = math.Min(hi, mu+14*sigma)
	if hi <= lo {
		return 0
	}
	const n = 4000
	h := (hi - lo) / n
	f := func(u float64) float64 {
		z := (u - mu) / sigma
		return math.Exp(-0.5*z*z) / (sigma * math.Sqrt(2*math.Pi))
	}
	s := f(lo) + f(hi)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		s += w * f(lo+float64(i)*h)
	}
	return s * h / 3
}

func TestLogMixProbsAgainstIntegration(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const m = 5
	for trial := 0; trial < 4; trial++ {
		params := make([]float32, 3*m)
		for i := 0; i < m; i++ {
			params[i] = float32(rng.NormFloat64())
			params[m+i] = float32(rng.Float64()*5 - 0.5)           // median tau from 0.6 to 90 bins
			params[2*m+i] = float32(math.Log(0.2 + rng.Float64())) // sigma 0.2..1.2
		}
		out := make([]float32, 81)
		LogMixProbs(params, m, out)
		checkDist(t, "random mixture", out)
		// Reference: softmax weights by hand, masses by integration.
		var z float64
		for i := 0; i < m; i++ {
			z += math.Exp(float64(params[i]))
		}
		var tot float64
		for k := 0; k <= 80; k++ {
			lo, hi := math.Inf(-1), math.Inf(1)
			if k > 0 {
				lo = math.Log(float64(k))
			}
			if k < 80 {
				hi = math.Log(float64(k + 1))
			}
			var want float64
			for i := 0; i < m; i++ {
				w := math.Exp(float64(params[i])) / z
				want += w * refMass(float64(params[m+i]), math.Exp(float64(params[2*m+i])), lo, hi)
			}
			want = math.Max(want, ProbFloor)
			tot += want
			if d := math.Abs(float64(out[k]) - want); d > 2e-6 {
				t.Errorf("trial %d class %d: p = %v, integration %v (|diff| %g > 2e-6)", trial, k, out[k], want, d)
			}
		}
		if math.Abs(tot-1) > 1e-6 {
			t.Errorf("reference masses sum to %v", tot)
		}
	}
}

// logNormDiff returns log(Phi(b) - Phi(a)) for a <= b, without cancellation
// in either tail.
func logNormDiff(a, b float64) float64 {
	switch {
	case !(a < b):
		return math.Inf(-1)
	case b <= 0:
		// Both in the lower half: Phi(b) - Phi(a) = Phi(b) (1 - Phi(a)/Phi(b)).
		lb := logNormCDF(b)
		return lb + log1mExp(logNormCDF(a)-lb)
	case a >= 0:
		// Both in the upper half: Q(a) - Q(b) = Q(a) (1 - Q(b)/Q(a)).
		la := logNormSF(a)
		return la + log1mExp(logNormSF(b)-la)
	default:
		// Straddling 0: erf is accurate near 0 and the result is >= its
		// smaller half, so no catastrophic cancellation.
		return math.Log(0.5 * (math.Erf(b/math.Sqrt2) - math.Erf(a/math.Sqrt2)))
	}
}

// log1mExp returns log(1 - exp(x)) for x <= 0 (Maechler, "Accurately
// computing log(1 - exp(-|a|))", 2012).
func log1mExp(x float64) float64 {
	switch {
	case x > -math.Ln2:
		return math.Log(-math.Expm1(x))
	default:
		return math.Log1p(-math.Exp(x))
	}
}

// logMixProbsLogSpace is the slow log-space reference for LogMixProbs:
// every component's class mass as a log-difference of normal CDFs, combined
// over components with log-sum-exp.
func logMixProbsLogSpace(params []float32, mixtures int, out []float32) {
	classes := len(out)
	checkLogMix(params, mixtures, classes)
	h := classes - 1
	// Online log-sum-exp per class over the mixtures.
	var mx, sum, logB [maxDistClasses]float64
	for k := 0; k < classes; k++ {
		mx[k] = math.Inf(-1)
		logB[k] = math.Log(float64(k + 1)) // upper boundary of class k < h
	}
	lse := logSumExp32(params[:mixtures])
	for m := 0; m < mixtures; m++ {
		logw, mu, logSigma := logMixComponent(params, mixtures, m, lse)
		// A component this light cannot move any probability by more than
		// 1e-30, far below float32 resolution of the floored result.
		if !(logw > math.Log(ProbFloor)-41) {
			continue
		}
		inv := math.Exp(-logSigma)
		// Walk the class boundaries z_1 < z_2 < ... once, keeping log Phi
		// (lower half) or log Q (upper half) of the previous boundary, so
		// each boundary costs one erfc and one log.
		zPrev, lPrev := math.Inf(-1), math.Inf(-1) // z and log Phi at tau = 0
		for k := 0; k < classes; k++ {
			var lp float64
			if k < h {
				z := (logB[k] - mu) * inv
				var l float64
				switch {
				case z <= 0:
					// Both boundaries in the lower half: Phi(z) - Phi(zPrev).
					l = logNormCDF(z)
					lp = l + log1mExp(lPrev-l)
				case zPrev >= 0:
					// Both in the upper half: Q(zPrev) - Q(z).
					l = logNormSF(z)
					lp = lPrev + log1mExp(l-lPrev)
				default:
					// Straddling 0 (once per component).
					l = logNormSF(z)
					lp = logNormDiff(zPrev, z)
				}
				if z == zPrev {
					lp = math.Inf(-1)
				}
				zPrev, lPrev = z, l
			} else if zPrev <= 0 {
				lp = log1mExp(lPrev) // Q(z) = 1 - Phi(z)
			} else {
				lp = lPrev
			}
			v := logw + lp
			switch {
			case math.IsInf(v, -1) || math.IsNaN(v):
			case v > mx[k]:
				sum[k] = sum[k]*math.Exp(mx[k]-v) + 1
				mx[k] = v
			default:
				sum[k] += math.Exp(v - mx[k])
			}
		}
	}
	var t float64
	for k := 0; k < classes; k++ {
		p := ProbFloor
		if sum[k] > 0 {
			p = math.Max(math.Exp(mx[k])*sum[k], ProbFloor)
		}
		out[k] = float32(p)
		t += p
	}
	for k := range out {
		out[k] = float32(float64(out[k]) / t)
	}
}

func TestLogMixProbsExtreme(t *testing.T) {
	const m = 3
	mk := func(logits, mus, logsig [m]float32) []float32 {
		p := append(append(logits[:], mus[:]...), logsig[:]...)
		return p
	}
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	cases := []struct {
		name   string
		params []float32
		class  int // class expected to hold ~all mass, or -1
	}{
		{"tiny sigma inside class 10", mk([m]float32{0, -1e30, -1e30}, [m]float32{ln(10.5), 0, 0}, [m]float32{-60, 0, 0}), 10},
		{"tiny sigma on boundary", mk([m]float32{0, 0, 0}, [m]float32{ln(3), ln(3), ln(3)}, [m]float32{-1e30, -1e30, -1e30}), -1},
		{"huge sigma", mk([m]float32{0, 0, 0}, [m]float32{0, 1, 2}, [m]float32{1e30, 90, 50}), -1},
		{"mean far above", mk([m]float32{0, 0, 0}, [m]float32{1e6, 1e30, 3e38}, [m]float32{0, -5, 3}), 80},
		{"mean far below", mk([m]float32{0, 0, 0}, [m]float32{-1e6, -3e38, -50}, [m]float32{0, -30, 0}), 0},
		{"extreme logits", mk([m]float32{3e38, -3e38, 0}, [m]float32{ln(40.5), 0, 0}, [m]float32{-30, 0, 0}), 40},
		{"far tail of tiny sigma", mk([m]float32{0, -1e30, -1e30}, [m]float32{ln(60.5), 0, 0}, [m]float32{-39, 0, 0}), 60},
	}
	for _, c := range cases {
		out := make([]float32, 81)
		LogMixProbs(c.params, m, out)
		checkDist(t, c.name, out)
		if c.class >= 0 && out[c.class] < 0.999 {
			t.Errorf("%s: p[%d] = %v, want ~1", c.name, c.class, out[c.class])
		}
		for k := 0; k <= 80; k++ {
			nll := LogMixDensityNLL(c.params, m, k)
			if math.IsNaN(nll) || math.IsInf(nll, -1) {
				t.Errorf("%s: density NLL of class %d is %v", c.name, k, nll)
			}
		}
	}
}

func TestLogNormDiffTails(t *testing.T) {
	// Deep upper tail: Q(40) - Q(41), computed via the asymptotic series
	// independently: log Q(x) ~ -x^2/2 - log(x) - log(sqrt(2 pi)).
	got := logNormDiff(40, 41)
	want := -800 - math.Log(40) - 0.5*math.Log(2*math.Pi) + math.Log1p(-1.0/1600+3.0/(1600*1600))
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("log(Q(40)-Q(41)) = %v, want %v", got, want)
	}
	// Mirror symmetry: Phi(-41..-40) equals Q(40..41).
	if d := math.Abs(logNormDiff(-41, -40) - got); d > 1e-9 {
		t.Errorf("lower-tail mirror differs by %g", d)
	}
	// Straddling: Phi(1) - Phi(-1) = 0.682689492137.
	if d := math.Abs(math.Exp(logNormDiff(-1, 1)) - 0.682689492137); d > 1e-11 {
		t.Errorf("Phi(1)-Phi(-1) off by %g", d)
	}
}

func TestLogMixDensityNLLHandComputed(t *testing.T) {
	// One component: log-normal with mu = ln 5, sigma = 0.5.
	mu, sigma := math.Log(5), 0.5
	params := []float32{0, float32(mu), float32(math.Log(sigma))}
	for _, k := range []int{0, 3, 17, 79} {
		tau := float64(k) + 0.5
		z := (math.Log(tau) - float64(float32(mu))) / sigma
		dens := math.Exp(-0.5*z*z) / (tau * sigma * math.Sqrt(2*math.Pi))
		if got, want := LogMixDensityNLL(params, 1, k), -math.Log(dens); math.Abs(got-want) > 1e-6 {
			t.Errorf("class %d: NLL %v, want %v", k, got, want)
		}
	}
	// Class 80: -log P(tau > 80), by integration.
	want := -math.Log(refMass(float64(float32(mu)), sigma, math.Log(80), math.Inf(1)))
	if got := LogMixDensityNLL(params, 1, 80); math.Abs(got-want) > 1e-4*math.Abs(want) {
		t.Errorf("class 80: NLL %v, want %v", got, want)
	}
	// Two equal-weight copies of the same component are the same mixture.
	two := []float32{3, 3, params[1], params[1], params[2], params[2]}
	for _, k := range []int{2, 80} {
		if a, b := LogMixDensityNLL(params, 1, k), LogMixDensityNLL(two, 2, k); math.Abs(a-b) > 1e-9 {
			t.Errorf("class %d: duplicated mixture NLL %v != %v", k, b, a)
		}
	}
}

func TestNLLAndMedian(t *testing.T) {
	p := []float32{0.1, 0.2, 0.3, 0.4, 0}
	if got := NLL(p, 2); math.Abs(got+math.Log(0.3)) > 1e-7 {
		t.Errorf("NLL = %v, want %v", got, -math.Log(0.3))
	}
	if got := NLL(p, 4); math.Abs(got+math.Log(ProbFloor)) > 1e-9 {
		t.Errorf("NLL of a zero probability = %v, want the floor's %v", got, -math.Log(ProbFloor))
	}
	cases := []struct {
		p    []float32
		want int
	}{
		{[]float32{0.1, 0.2, 0.3, 0.4}, 2}, // 0.1, 0.3, 0.6
		{[]float32{0.5, 0.5}, 0},           // reaches exactly 0.5
		{[]float32{0.25, 0.25, 0.5}, 1},    // 0.25, 0.5
		{[]float32{0, 0, 0, 1}, 3},
		{[]float32{0.1, 0.1, 0.1}, 2}, // never reaches 0.5: last class
	}
	for _, c := range cases {
		if got := Median(c.p); got != c.want {
			t.Errorf("Median(%v) = %d, want %d", c.p, got, c.want)
		}
	}
}

func BenchmarkLogMixProbs(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	params := make([]float32, 3*64)
	for i := range params {
		params[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, 81)
	for b.Loop() {
		LogMixProbs(params, 64, out)
	}
}

// TestLogMixProbsMatchesLogSpace checks the linear-space LogMixProbs against
// the log-space reference on random and extreme mixtures: every class within
// 2e-6 relative (float32 output) - i.e. the floor hides every difference.
func TestLogMixProbsMatchesLogSpace(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const m = 16
	scales := []struct{ logit, mu, sigma, sigmaOff float64 }{
		{1, 1, 1, 0}, {10, 3, 3, 0}, {100, 10, 0.1, -20}, {1, 1, 0.1, 30}, {1e30, 1e20, 1, -45}, {3, 2, 5, 0},
	}
	for trial := 0; trial < 300; trial++ {
		sc := scales[trial%len(scales)]
		params := make([]float32, 3*m)
		for i := 0; i < m; i++ {
			params[i] = float32(sc.logit * rng.NormFloat64())
			params[m+i] = float32(2 + sc.mu*rng.NormFloat64())
			params[2*m+i] = float32(sc.sigmaOff + sc.sigma*rng.NormFloat64())
		}
		fast := make([]float32, 81)
		slow := make([]float32, 81)
		LogMixProbs(params, m, fast)
		logMixProbsLogSpace(params, m, slow)
		checkDist(t, "fast", fast)
		for k := range fast {
			a, b := float64(fast[k]), float64(slow[k])
			if math.Abs(a-b) > 2e-6*math.Max(a, b)+1e-15 {
				t.Fatalf("trial %d class %d: linear %v, log-space %v", trial, k, a, b)
			}
		}
	}
}

func TestCheckDist(t *testing.T) {
	uniform := func(total float32) []float32 {
		p := make([]float32, 81)
		for i := range p {
			p[i] = total / 81
		}
		return p
	}
	nan := uniform(1)
	nan[3] = float32(math.NaN())
	neg := uniform(1)
	neg[0], neg[1] = -0.01, neg[1]+0.01
	for _, tc := range []struct {
		name  string
		probs []float32
		ok    bool
	}{
		{"uniform", uniform(1), true},
		{"within tolerance", uniform(1 + DistTolerance/2), true},
		{"all zeros", uniform(0), false},
		{"unnormalised", uniform(2), false},
		{"off by twice the tolerance", uniform(1 - 2*DistTolerance), false},
		{"NaN", nan, false},
		{"negative", neg, false},
	} {
		if err := CheckDist(tc.probs); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
