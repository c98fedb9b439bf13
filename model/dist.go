package model

import (
	"fmt"
	"math"

	"rgcpred/rgc"
)

// Output distributions of docs/model.md section 2.3 ("Heads"): the
// cat head's softmax over classes and the logmix head's log-normal mixture
// over the time to the next spike, integrated over each class's interval.

// ProbFloor is the smallest probability a class gets from CatProbs and
// LogMixProbs (they clamp and renormalise), and the floor NLL applies: the
// largest NLL of one sample is therefore -ln(1e-12) ~ 27.6 nats.
const ProbFloor = 1e-12

// Bounds on a logmix component's log standard deviation (in log-bins).
// Values outside are clamped before use so that no sigma underflows to zero
// or overflows; inside the range (sigma from 4e-18 to 2.4e17) nothing
// changes, so trained models never notice.
const (
	MinLogSigma = -40.0
	MaxLogSigma = 40.0
)

// numClasses is the model's number of classes (Config.Validate insists on
// it).
const numClasses = rgc.NumClasses

// maxDistClasses bounds the number of classes so that the per-class
// accumulators live on the stack.
const maxDistClasses = 256

// CatProbs writes the softmax of logits to out (same length): a numerically
// stable softmax (max subtracted, sums in float64), each probability clamped
// to at least ProbFloor and renormalised. NaN logits give NaN; infinite ones
// are handled (+Inf takes all the mass, shared among the +Inf classes).
func CatProbs(logits, out []float32) {
	if len(out) != len(logits) {
		panic(fmt.Sprintf("model: CatProbs with %d logits and %d outputs", len(logits), len(out)))
	}
	if len(logits) == 0 {
		return
	}
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range logits {
		var e float64
		switch {
		case math.IsInf(mx, 0):
			// All -Inf (uniform) or some +Inf (uniform over those).
			if float64(v) == mx {
				e = 1
			}
		default:
			e = math.Exp(float64(v) - mx)
		}
		s += e
	}
	var t float64
	for i, v := range logits {
		var e float64
		if math.IsInf(mx, 0) {
			if float64(v) == mx {
				e = 1
			}
		} else {
			e = math.Exp(float64(v) - mx)
		}
		p := math.Max(e/s, ProbFloor)
		out[i] = float32(p)
		t += p
	}
	for i := range out {
		out[i] = float32(float64(out[i]) / t)
	}
}

// Probs writes the class probabilities (len(out) = Classes) of one head
// output headOut (HeadOut values) to out: CatProbs for the cat head,
// LogMixProbs for logmix. It is the one map from head outputs to class
// probabilities; the engine, the reference, the training run's validation
// and the evaluation all call it.
func (c Config) Probs(headOut, out []float32) {
	if len(headOut) != c.HeadOut() || len(out) != c.Classes {
		panic(fmt.Sprintf("model: %s probabilities of %d head outputs into %d classes (want %d and %d)",
			c.Name(), len(headOut), len(out), c.HeadOut(), c.Classes))
	}
	if c.Head == HeadLogMix {
		LogMixProbs(headOut, c.Mixtures, out)
		return
	}
	CatProbs(headOut, out)
}

// logNormCDF returns log Phi(x), the log of the standard normal CDF, accurate
// far into the lower tail.
func logNormCDF(x float64) float64 {
	switch {
	case math.IsInf(x, -1):
		return math.Inf(-1)
	case x > 5:
		// Phi(x) = 1 - Q(x) with Q(x) tiny: log1p is exact enough.
		return math.Log1p(-0.5 * math.Erfc(x/math.Sqrt2))
	case x > -37:
		return math.Log(0.5 * math.Erfc(-x/math.Sqrt2))
	default:
		// Asymptotic series (Abramowitz & Stegun 26.2.12):
		// Phi(x) ~ phi(x)/(-x) * (1 - 1/x^2 + 3/x^4 - 15/x^6).
		x2 := x * x
		return -0.5*x2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) +
			math.Log1p(-1/x2+3/(x2*x2)-15/(x2*x2*x2))
	}
}

// logNormSF returns log Q(x) = log(1 - Phi(x)) = log Phi(-x).
func logNormSF(x float64) float64 { return logNormCDF(-x) }

// logMixComponent returns mixture m's log weight (log-softmax of the
// mixture logits, with the given log-sum-exp), mean and clamped log sigma.
func logMixComponent(params []float32, mixtures, m int, lse float64) (logw, mu, logSigma float64) {
	logw = float64(params[m]) - lse
	mu = float64(params[mixtures+m])
	logSigma = math.Min(math.Max(float64(params[2*mixtures+m]), MinLogSigma), MaxLogSigma)
	return
}

// logSumExp32 returns log(sum(exp(x))) over float32 values, in float64.
func logSumExp32(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	if math.IsInf(mx, 0) {
		return mx
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

func checkLogMix(params []float32, mixtures, classes int) {
	if mixtures < 1 || len(params) != 3*mixtures {
		panic(fmt.Sprintf("model: logmix with %d params for %d mixtures", len(params), mixtures))
	}
	if classes < 2 || classes > maxDistClasses {
		panic(fmt.Sprintf("model: logmix over %d classes (want 2..%d)", classes, maxDistClasses))
	}
}

// LogMixProbs writes the class probabilities of a mixture of log-normal
// distributions over tau, the time to the next spike in bins, to out
// (len(out) = H+1 classes for horizon H, 81 for the model). params holds
// 3*mixtures values: [0:M] the mixture logits, [M:2M] the means mu of
// log tau, [2M:3M] the log standard deviations of log tau (clamped to
// [MinLogSigma, MaxLogSigma]). Class k < H is the mass on (k, k+1], class H
// the mass on (H, inf).
//
// Numerics (extreme logits or tiny sigmas give no NaN or -Inf):
//   - Everything is computed in float64; mixture weights are a
//     max-subtracted softmax.
//   - A component's mass on an interval is a difference of normal CDFs in
//     whichever tail avoids cancellation: Phi(b) - Phi(a) below the median,
//     Q(a) - Q(b) above it, both from erfc (full relative precision deep in
//     the tails).
//   - Each probability is clamped to at least ProbFloor, then the whole is
//     renormalised.
//   - Masses are summed in linear space: float64 resolves them to ~1e-300
//     and to ~1e-16 absolute, four orders below ProbFloor, so after the floor the result
//     equals the log-space computation (kept in the test file, which checks
//     agreement on extreme inputs) at one erfc per class boundary and
//     component, no exp or log.
func LogMixProbs(params []float32, mixtures int, out []float32) {
	classes := len(out)
	checkLogMix(params, mixtures, classes)
	h := classes - 1
	var p, logB [maxDistClasses]float64
	for k := 0; k < h; k++ {
		logB[k] = math.Log(float64(k + 1)) // upper boundary of class k < h
	}
	lse := logSumExp32(params[:mixtures])
	for m := 0; m < mixtures; m++ {
		logw, mu, logSigma := logMixComponent(params, mixtures, m, lse)
		w := math.Exp(logw)
		if !(w > 0) {
			continue
		}
		inv := math.Exp(-logSigma)
		// Walk the boundaries z_1 <= z_2 <= ... keeping Phi(z) while z <= 0
		// and Q(z) after, each from one erfc.
		zPrev, cPrev := math.Inf(-1), 0.0 // z and Phi at tau = 0
		for k := 0; k < h; k++ {
			z := (logB[k] - mu) * inv
			var c, mass float64
			switch {
			case z <= 0:
				c = 0.5 * math.Erfc(-z/math.Sqrt2) // Phi(z)
				mass = c - cPrev
			case zPrev >= 0:
				c = 0.5 * math.Erfc(z/math.Sqrt2) // Q(z)
				mass = cPrev - c
			default: // straddling the median: Q(zPrev) - Q(z)
				c = 0.5 * math.Erfc(z/math.Sqrt2)
				mass = 0.5*math.Erfc(zPrev/math.Sqrt2) - c
			}
			p[k] += w * math.Max(mass, 0)
			zPrev, cPrev = z, c
		}
		if zPrev <= 0 {
			p[h] += w * (1 - cPrev) // Q = 1 - Phi with Phi <= 0.5: no cancellation
		} else {
			p[h] += w * cPrev
		}
	}
	var t float64
	for k := 0; k < classes; k++ {
		q := math.Max(p[k], ProbFloor)
		if math.IsNaN(p[k]) {
			q = ProbFloor
		}
		out[k] = float32(q)
		t += q
	}
	for k := range out {
		out[k] = float32(float64(out[k]) / t)
	}
}

// LogMixDensityNLL is the logmix training loss of one sample, the definition
// the gorgonia training graph implements (and is tested against): for class
// k < rgc.Horizon the negative log density of the mixture at the class's
// midpoint tau = k + 0.5 bins; for class rgc.Horizon the negative log of the
// mass P(tau > rgc.Horizon). The paper trains on the density; the
// censored last class has no density, so its mass stands in (our choice).
// Log sigmas are clamped as in LogMixProbs.
func LogMixDensityNLL(params []float32, mixtures, class int) float64 {
	checkLogMix(params, mixtures, numClasses)
	h := numClasses - 1
	if class < 0 || class > h {
		panic(fmt.Sprintf("model: class %d outside 0..%d", class, h))
	}
	lse := logSumExp32(params[:mixtures])
	mx, s := math.Inf(-1), 0.0
	for m := 0; m < mixtures; m++ {
		logw, mu, logSigma := logMixComponent(params, mixtures, m, lse)
		var v float64
		if class < h {
			t := float64(class) + 0.5
			z := (math.Log(t) - mu) * math.Exp(-logSigma)
			// log-normal density: phi(z) / (t sigma)
			v = logw - 0.5*z*z - 0.5*math.Log(2*math.Pi) - logSigma - math.Log(t)
		} else {
			v = logw + logNormSF((math.Log(float64(h))-mu)*math.Exp(-logSigma))
		}
		switch {
		case math.IsInf(v, -1) || math.IsNaN(v):
		case v > mx:
			s = s*math.Exp(mx-v) + 1
			mx = v
		default:
			s += math.Exp(v - mx)
		}
	}
	if s == 0 {
		return math.Inf(1)
	}
	return -(mx + math.Log(s))
}

// NLL returns the negative log-likelihood (natural log) of class under the
// distribution probs, with the probability clamped to at least ProbFloor.
func NLL(probs []float32, class int) float64 {
	if class < 0 || class >= len(probs) {
		panic(fmt.Sprintf("model: NLL of class %d with %d classes", class, len(probs)))
	}
	return -math.Log(math.Max(float64(probs[class]), ProbFloor))
}

// Median returns the point prediction of a distribution: the first class
// whose cumulative probability reaches 0.5 (the last class if rounding keeps
// the sum below 0.5).
func Median(probs []float32) int {
	var c float64
	for k, p := range probs {
		c += float64(p)
		if c >= 0.5 {
			return k
		}
	}
	return len(probs) - 1
}

// DistTolerance bounds how far a distribution's total may be from 1: the
// float32 softmax and log-mixture masses over 81 classes are within 1e-5
// of it, so an output further off (all zeros, unnormalised) is a fault.
const DistTolerance = 1e-3

// CheckDist reports an error unless probs is a probability distribution:
// every entry finite and non-negative, the total 1 within DistTolerance.
func CheckDist(probs []float32) error {
	var sum float64
	for k, p := range probs {
		if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) || p < 0 {
			return fmt.Errorf("model: class %d has probability %v", k, p)
		}
		sum += float64(p)
	}
	if math.Abs(sum-1) > DistTolerance {
		return fmt.Errorf("model: probabilities sum to %g, want 1", sum)
	}
	return nil
}
