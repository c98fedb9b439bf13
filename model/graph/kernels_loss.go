package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"rgcpred/model"
)

// catNLL is the per-window negative log-likelihood of the categorical head:
// logits [B, K], targets [B] (class indices as float32) -> [B], computed by
// log-sum-exp.
type catNLL struct{}

func (catNLL) name() string    { return "catnll" }
func (catNLL) diffWRT() []bool { return []bool{true, false} }
func (catNLL) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || len(in[0]) != 2 || len(in[1]) != 1 || in[0][0] != in[1][0] {
		return nil, fmt.Errorf("want logits [B,K] and targets [B], got %v", in)
	}
	return tensor.Shape{in[0][0]}, nil
}

func classIndex(v float32, k int) int {
	i := int(v)
	if i < 0 || i >= k {
		panic(fmt.Sprintf("graph: target class %v out of range [0,%d)", v, k))
	}
	return i
}

func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

func (catNLL) forward(in []*tensor.Dense, out []float32) {
	k := in[0].Shape()[1]
	z, t := f32(in[0]), f32(in[1])
	for b, tv := range t {
		row := z[b*k : (b+1)*k]
		out[b] = float32(logSumExp(row) - float64(row[classIndex(tv, k)]))
	}
}
func (catNLL) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	k := in[0].Shape()[1]
	z, t := f32(in[0]), f32(in[1])
	for b, tv := range t {
		row := z[b*k : (b+1)*k]
		lse := logSumExp(row)
		g := gin[b*k : (b+1)*k]
		for j, v := range row {
			g[j] = float32(math.Exp(float64(v)-lse)) * gout[b]
		}
		g[classIndex(tv, k)] -= gout[b]
	}
}

// catCE is the per-window cross-entropy of the categorical head against a
// target distribution: logits [B, K], targets [B, K] (each row a
// distribution over the K classes) -> [B], sum_k p_k (lse(z) - z_k). With
// one-hot rows it equals catNLL; with a teacher's soft predictions (or a
// mixture of those and the one-hot truth) it is the distillation loss of
// Hinton, Vinyals & Dean (2015, "Distilling the knowledge in a neural
// network"), at temperature 1.
type catCE struct{}

func (catCE) name() string    { return "catce" }
func (catCE) diffWRT() []bool { return []bool{true, false} }
func (catCE) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || len(in[0]) != 2 || !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("want logits [B,K] and target distributions [B,K], got %v", in)
	}
	return tensor.Shape{in[0][0]}, nil
}

func (catCE) forward(in []*tensor.Dense, out []float32) {
	k := in[0].Shape()[1]
	z, p := f32(in[0]), f32(in[1])
	for b := range out {
		row, pr := z[b*k:(b+1)*k], p[b*k:(b+1)*k]
		lse := logSumExp(row)
		var ce float64
		for j, pj := range pr {
			if pj != 0 {
				ce += float64(pj) * (lse - float64(row[j]))
			}
		}
		out[b] = float32(ce)
	}
}

func (catCE) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	k := in[0].Shape()[1]
	z, p := f32(in[0]), f32(in[1])
	for b := range gout {
		row, pr := z[b*k:(b+1)*k], p[b*k:(b+1)*k]
		lse := logSumExp(row)
		var sum float64
		for _, pj := range pr {
			sum += float64(pj)
		}
		g := gin[b*k : (b+1)*k]
		for j, v := range row {
			g[j] = float32((math.Exp(float64(v)-lse)*sum - float64(pr[j])) * float64(gout[b]))
		}
	}
}

// logMixNLL is the per-window training loss of the logmix head: params
// [B, 3M] hold M mixture logits, M means and M log standard deviations of a
// mixture of log-normal distributions of the time to the next spike (in
// bins); targets [B] hold classes. Class k < horizon scores the mixture
// density at k + 0.5, class horizon the probability of a time beyond
// horizon (the paper trains on the density; see model.LogMixDensityNLL).
type logMixNLL struct{ m, horizon int }

func (l logMixNLL) name() string  { return fmt.Sprintf("logmixnll(m%d,h%d)", l.m, l.horizon) }
func (logMixNLL) diffWRT() []bool { return []bool{true, false} }
func (l logMixNLL) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || len(in[0]) != 2 || len(in[1]) != 1 || in[0][0] != in[1][0] || in[0][1] != 3*l.m {
		return nil, fmt.Errorf("want params [B,%d] and targets [B], got %v", 3*l.m, in)
	}
	return tensor.Shape{in[0][0]}, nil
}

const halfLog2Pi = 0.9189385332046727 // log(2 pi)/2

// logNormTail returns log Q(z), Q the standard normal upper tail, and
// h = phi(z)/Q(z) (the hazard), stably for any z.
func logNormTail(z float64) (logQ, h float64) {
	logPhi := -0.5*z*z - halfLog2Pi
	if z < 8 {
		q := 0.5 * math.Erfc(z/math.Sqrt2)
		logQ = math.Log(q)
	} else {
		// Asymptotic expansion: Q(z) = phi(z)/z (1 - 1/z^2 + 3/z^4 - 15/z^6 ...).
		z2 := 1 / (z * z)
		logQ = logPhi - math.Log(z) + math.Log1p(-z2+3*z2*z2-15*z2*z2*z2)
	}
	return logQ, math.Exp(logPhi - logQ)
}

// logMixTerms fills lt with log(pi_m) + log(component term) and returns
// their log-sum-exp (= -NLL); dz, when not nil, receives for each component
// the derivatives of its log term with respect to mu and log sigma.
func (l logMixNLL) logMixTerms(p []float32, class int, lt, dmu, dls []float64) float64 {
	m := l.m
	lse := logSumExp(p[:m])
	for c := 0; c < m; c++ {
		mu, ls := float64(p[m+c]), float64(p[2*m+c])
		// The log standard deviation is clamped as in model.LogMixProbs;
		// outside the clamp its gradient is 0.
		clamped := ls < model.MinLogSigma || ls > model.MaxLogSigma
		ls = math.Min(math.Max(ls, model.MinLogSigma), model.MaxLogSigma)
		sigma := math.Exp(ls)
		lp := float64(p[c]) - lse
		if class < l.horizon {
			tau := float64(class) + 0.5
			lnt := math.Log(tau)
			z := (lnt - mu) / sigma
			lt[c] = lp - lnt - ls - halfLog2Pi - 0.5*z*z
			dmu[c] = z / sigma
			dls[c] = z*z - 1
		} else {
			z := (math.Log(float64(l.horizon)) - mu) / sigma
			lq, h := logNormTail(z)
			lt[c] = lp + lq
			dmu[c] = h / sigma
			dls[c] = h * z
		}
		if clamped {
			dls[c] = 0
		}
	}
	mx := math.Inf(-1)
	for _, v := range lt[:m] {
		mx = math.Max(mx, v)
	}
	var s float64
	for _, v := range lt[:m] {
		s += math.Exp(v - mx)
	}
	return mx + math.Log(s)
}

func (l logMixNLL) forward(in []*tensor.Dense, out []float32) {
	p, t := f32(in[0]), f32(in[1])
	lt, dmu, dls := make([]float64, l.m), make([]float64, l.m), make([]float64, l.m)
	for b, tv := range t {
		out[b] = float32(-l.logMixTerms(p[b*3*l.m:(b+1)*3*l.m], classIndex(tv, l.horizon+1), lt, dmu, dls))
	}
}

func (l logMixNLL) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	p, t := f32(in[0]), f32(in[1])
	m := l.m
	lt, dmu, dls := make([]float64, m), make([]float64, m), make([]float64, m)
	for b, tv := range t {
		pb := p[b*3*m : (b+1)*3*m]
		g := gin[b*3*m : (b+1)*3*m]
		lp := l.logMixTerms(pb, classIndex(tv, l.horizon+1), lt, dmu, dls)
		lse := logSumExp(pb[:m])
		gb := float64(gout[b])
		for c := 0; c < m; c++ {
			r := math.Exp(lt[c] - lp) // posterior responsibility
			pi := math.Exp(float64(pb[c]) - lse)
			g[c] = float32(gb * (pi - r))
			g[m+c] = float32(-gb * r * dmu[c])
			g[2*m+c] = float32(-gb * r * dls[c])
		}
	}
}

// meanAll is the mean of a vector [B] as a one-element tensor [1]: the
// batch loss from the per-window losses.
type meanAll struct{}

func (meanAll) name() string    { return "mean" }
func (meanAll) diffWRT() []bool { return []bool{true} }
func (meanAll) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 || len(in[0]) != 1 || in[0][0] < 1 {
		return nil, fmt.Errorf("want a vector [B], got %v", in)
	}
	return tensor.Shape{1}, nil
}
func (meanAll) forward(in []*tensor.Dense, out []float32) {
	x := f32(in[0])
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	out[0] = float32(s / float64(len(x)))
}
func (meanAll) backward(_ int, _ []*tensor.Dense, _, gout, gin []float32) {
	v := gout[0] / float32(len(gin))
	for i := range gin {
		gin[i] = v
	}
}
