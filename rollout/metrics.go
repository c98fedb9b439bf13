package rollout

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
)

// Spike-train metrics of docs/model.md section 5, after the
// evaluation of Doran & Baden ("Categorical Distributions are Effective
// Neural Network Outputs for Event Prediction") and Doran et al. (ICML 2024):
//
//   - Van Rossum distance (van Rossum 2001, Neural Computation 13:751): both
//     trains are filtered with the causal kernel exp(-n/tau), n = 0, 1, ...,
//     over the trains' own bins (the tail past the last bin is not summed),
//     and D = sqrt((2/tau) * sum_i (fa[i] - fb[i])^2).
//   - Schreiber similarity (Schreiber et al. 2003, Neurocomputing 52:925):
//     the cosine of the angle between the Gaussian-smoothed trains, bins
//     beyond either end counting as 0.
//   - Smoothed Pearson correlation: the Pearson correlation of the
//     Gaussian-smoothed trains, each extended beyond its ends by symmetric
//     reflection that repeats the edge bin (d c b a | a b c d | d c b a),
//     periodically with period 2N when the kernel is longer than the train.
//
// The Gaussian kernel has standard deviation tau bins, radius round(4 tau)
// (math.Round, halves away from zero) and is normalised to sum to 1. The
// same tau serves all three metrics: tau = sigma_ms / bin_ms, raised to
// MinTau when smaller.

// Default smoothing of the spec: 60 ms at bins of 1.0082 ms.
const (
	// DefaultSigmaMs is the default smoothing time scale in milliseconds.
	DefaultSigmaMs = 60.0
	// DefaultBinMs is the bin length the metrics command assumes by default.
	DefaultBinMs = 1.0082
	// MinTau is the smallest smoothing time scale in bins.
	MinTau = 0.25
)

// Tau converts a smoothing time scale in milliseconds to bins, at least
// MinTau. It fails on non-positive or non-finite arguments.
func Tau(sigmaMs, binMs float64) (float64, error) {
	if !(sigmaMs > 0) || math.IsInf(sigmaMs, 0) {
		return 0, fmt.Errorf("smoothing %v ms: must be a positive finite number", sigmaMs)
	}
	if !(binMs > 0) || math.IsInf(binMs, 0) {
		return 0, fmt.Errorf("bin length %v ms: must be a positive finite number", binMs)
	}
	return math.Max(sigmaMs/binMs, MinTau), nil
}

// GaussianKernel returns the normalised Gaussian of standard deviation tau
// bins on offsets -R..R, R = round(4 tau); element m+R is offset m.
func GaussianKernel(tau float64) []float64 {
	r := int(math.Round(4 * tau))
	k := make([]float64, 2*r+1)
	var sum float64
	for m := -r; m <= r; m++ {
		v := math.Exp(-float64(m*m) / (2 * tau * tau))
		k[m+r] = v
		sum += v
	}
	for i := range k {
		k[i] /= sum
	}
	return k
}

// SmoothZero writes to dst (len(x) elements) the convolution of x with the
// centred kernel k (odd length), counting bins beyond the ends of x as 0.
func SmoothZero(dst, x, k []float64) {
	clear(dst[:len(x)])
	r := len(k) / 2
	n := len(x)
	for i, v := range x {
		if v == 0 {
			continue
		}
		scatter(dst[:n], i, v, k, r)
	}
}

// SmoothReflect writes to dst (len(x) elements) the convolution of x with the
// centred kernel k (odd length), extending x beyond its ends by symmetric
// reflection repeating the edge bin: x[-1-j] = x[j], x[n+j] = x[n-1-j],
// periodic with period 2n.
func SmoothReflect(dst, x, k []float64) {
	n := len(x)
	clear(dst[:n])
	if n == 0 {
		return
	}
	r := len(k) / 2
	p := 2 * n
	// The images of bin i in the extended train are i + p*q and
	// p*q - 1 - i; only those in [-r, n-1+r] reach a bin of dst.
	qmax := r/p + 1
	for i, v := range x {
		if v == 0 {
			continue
		}
		for q := -qmax; q <= qmax; q++ {
			if a := i + p*q; a >= -r && a <= n-1+r {
				scatter(dst[:n], a, v, k, r)
			}
			if b := p*q - 1 - i; b >= -r && b <= n-1+r {
				scatter(dst[:n], b, v, k, r)
			}
		}
	}
}

// scatter adds v*k[j-pos+r] to dst[j] for every j of dst within r of pos.
func scatter(dst []float64, pos int, v float64, k []float64, r int) {
	lo, hi := pos-r, pos+r
	if lo < 0 {
		lo = 0
	}
	if hi > len(dst)-1 {
		hi = len(dst) - 1
	}
	for j := lo; j <= hi; j++ {
		dst[j] += v * k[j-pos+r]
	}
}

// Scores are the spike-train metrics between a generated and a recorded
// train.
type Scores struct {
	// VanRossum is the Van Rossum distance (lower is better).
	VanRossum float64 `json:"van_rossum"`
	// Schreiber is the Schreiber similarity (higher is better).
	Schreiber float64 `json:"schreiber"`
	// Pearson is the smoothed Pearson correlation (higher is better).
	Pearson float64 `json:"pearson"`
}

// Metrics computes the spike-train metrics at one smoothing time scale,
// reusing its scratch buffers: after the first call for a given train length
// Compare allocates nothing. A Metrics is not safe for concurrent use.
type Metrics struct {
	tau    float64
	kernel []float64
	sa, sb []float64
}

// NewMetrics returns a Metrics for smoothing sigmaMs at bins of binMs.
func NewMetrics(sigmaMs, binMs float64) (*Metrics, error) {
	tau, err := Tau(sigmaMs, binMs)
	if err != nil {
		return nil, err
	}
	return &Metrics{tau: tau, kernel: GaussianKernel(tau)}, nil
}

// TauBins returns the smoothing time scale in bins.
func (m *Metrics) TauBins() float64 { return m.tau }

// Compare returns the three metrics between trains a and b (count vectors
// over the same bins). It fails when the lengths differ, the trains are
// empty, or a count is not finite.
func (m *Metrics) Compare(a, b []float64) (Scores, error) {
	if len(a) != len(b) {
		return Scores{}, fmt.Errorf("compare spike trains: lengths %d and %d differ", len(a), len(b))
	}
	if len(a) == 0 {
		return Scores{}, errors.New("compare spike trains: trains have no bins")
	}
	for i := range a {
		if math.IsNaN(a[i]) || math.IsInf(a[i], 0) || math.IsNaN(b[i]) || math.IsInf(b[i], 0) {
			return Scores{}, fmt.Errorf("compare spike trains: bin %d: counts %v and %v must be finite", i, a[i], b[i])
		}
	}
	if cap(m.sa) < len(a) {
		m.sa = make([]float64, len(a))
		m.sb = make([]float64, len(a))
	}
	sa, sb := m.sa[:len(a)], m.sb[:len(a)]
	var s Scores
	s.VanRossum = VanRossum(a, b, m.tau)
	SmoothZero(sa, a, m.kernel)
	SmoothZero(sb, b, m.kernel)
	s.Schreiber = cosine(sa, sb)
	SmoothReflect(sa, a, m.kernel)
	SmoothReflect(sb, b, m.kernel)
	s.Pearson = pearson(sa, sb)
	return s, nil
}

// VanRossum returns the Van Rossum distance between a and b (same length)
// with the causal exponential kernel of time constant tau bins:
// f = (a-b) filtered by f[i] = f[i-1] exp(-1/tau) + (a[i]-b[i]), which is
// the convolution with exp(-n/tau), n >= 0, truncated at the last bin; then
// D = sqrt((2/tau) * sum f^2).
func VanRossum(a, b []float64, tau float64) float64 {
	decay := math.Exp(-1 / tau)
	var f, sum float64
	for i := range a {
		f = f*decay + (a[i] - b[i])
		sum += f * f
	}
	return math.Sqrt(2 / tau * sum)
}

// Schreiber returns the Schreiber similarity of a and b (same length) at
// Gaussian smoothing tau bins, zero beyond the ends. It allocates.
func Schreiber(a, b []float64, tau float64) float64 {
	k := GaussianKernel(tau)
	sa, sb := make([]float64, len(a)), make([]float64, len(b))
	SmoothZero(sa, a, k)
	SmoothZero(sb, b, k)
	return cosine(sa, sb)
}

// Pearson returns the smoothed Pearson correlation of a and b (same length)
// at Gaussian smoothing tau bins, reflected beyond the ends. It allocates.
func Pearson(a, b []float64, tau float64) float64 {
	k := GaussianKernel(tau)
	sa, sb := make([]float64, len(a)), make([]float64, len(b))
	SmoothReflect(sa, a, k)
	SmoothReflect(sb, b, k)
	return pearson(sa, sb)
}

// cosine is the cosine of the angle between x and y, 0 when either is all
// zeros.
func cosine(x, y []float64) float64 {
	var xy, xx, yy float64
	for i := range x {
		xy += x[i] * y[i]
		xx += x[i] * x[i]
		yy += y[i] * y[i]
	}
	if xx == 0 || yy == 0 {
		return 0
	}
	return xy / math.Sqrt(xx*yy)
}

// pearson is the Pearson correlation of x and y (gonum), 0 when either is
// constant: its range max-min is at most 1e-12 times max(1, |max|), which
// absorbs the rounding of smoothing a constant train.
func pearson(x, y []float64) float64 {
	if constant(x) || constant(y) {
		return 0
	}
	return stat.Correlation(x, y, nil)
}

func constant(x []float64) bool {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo = math.Min(lo, v)
		hi = math.Max(hi, v)
	}
	return hi-lo <= 1e-12*math.Max(1, math.Abs(hi))
}
