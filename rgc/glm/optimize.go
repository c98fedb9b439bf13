package glm

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"rgcpred/rgc"
)

// cellFit holds one worker's buffers.
type cellFit struct {
	d    *design
	opts *Options
	hist []float32 // n rows of nh history columns
	y    []bool
	eta  []float64 // linear predictor over the training bins
	etaT []float64 // at a trial point
	w    []float64 // curvature weights over the training bins
	x    []float64 // one row
	hess []float64 // p x p, upper triangle used
	grad []float64
	ms   []float64 // penalty weights m_i (0 for the bias)
}

func newCellFit(d *design, opts *Options) *cellFit {
	ntr := d.splits[rgc.Train][1] - d.splits[rgc.Train][0]
	return &cellFit{
		d: d, opts: opts,
		hist: make([]float32, d.n*d.nh),
		eta:  make([]float64, ntr), etaT: make([]float64, ntr), w: make([]float64, ntr),
		x: make([]float64, d.p), hess: make([]float64, d.p*d.p), grad: make([]float64, d.p),
		ms: make([]float64, d.p),
	}
}

// row writes bin u's design row to cf.x.
func (cf *cellFit) row(u int) {
	d := cf.d
	cf.x[0] = 1
	for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
		cf.x[1+k] = float64(v)
	}
	for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
		cf.x[1+d.ns+k] = float64(v)
	}
}

// linear writes theta . x_u for bins lo..hi-1 to eta.
func (cf *cellFit) linear(theta []float64, lo, hi int, eta []float64) {
	d := cf.d
	ws, wh := theta[1:1+d.ns], theta[1+d.ns:]
	for u := lo; u < hi; u++ {
		s := theta[0]
		for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
			s += ws[k] * float64(v)
		}
		for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
			s += wh[k] * float64(v)
		}
		eta[u-lo] = s
	}
}

// binNLL returns the negative log-likelihood of a bin with log intensity
// eta: a spike (at least one event of a Poisson process of rate
// lambda = exp(eta) in the bin) has probability 1 - exp(-lambda).
func binNLL(eta float64, spike bool) float64 {
	lam := math.Exp(eta)
	if spike {
		return -math.Log(-math.Expm1(-lam))
	}
	return lam
}

// binDeriv returns the first and second derivatives of binNLL in eta. Both
// the spike and the no-spike term are convex in eta (the complementary
// log-log link), so the penalised loss is convex.
func binDeriv(eta float64, spike bool) (g, h float64) {
	lam := math.Exp(eta)
	if !spike {
		return lam, lam
	}
	switch {
	case lam < 1e-8:
		return -1 + lam/2, lam / 2
	case lam > 40:
		e := math.Exp(-lam)
		return -lam * e, lam * lam * e
	}
	em := math.Expm1(lam)
	g = -lam / em
	h = lam * (lam*math.Exp(lam) - em) / (em * em)
	return g, h
}

// loss returns the penalised training loss at theta, its linear predictor
// written to eta.
func (cf *cellFit) loss(theta []float64, alpha float64, eta []float64) float64 {
	tr := cf.d.splits[rgc.Train]
	cf.linear(theta, tr[0], tr[1], eta)
	s := 0.0
	for i, e := range eta {
		s += binNLL(e, cf.y[tr[0]+i])
	}
	for k := 1; k < len(theta); k++ {
		s += alpha / 2 * cf.ms[k] * theta[k] * theta[k]
	}
	return s
}

// meanNLL returns the mean per-bin NLL of theta over split s (0 if empty).
func (cf *cellFit) meanNLL(theta []float64, s rgc.Split) float64 {
	r := cf.d.splits[s]
	if r[1] <= r[0] {
		return 0
	}
	sum := 0.0
	d := cf.d
	for u := r[0]; u < r[1]; u++ {
		e := theta[0]
		for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
			e += theta[1+k] * float64(v)
		}
		for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
			e += theta[1+d.ns+k] * float64(v)
		}
		sum += binNLL(e, cf.y[u])
	}
	return sum / float64(r[1]-r[0])
}

// fit fits one cell over every penalty and keeps the best on validation.
func (cf *cellFit) fit(ctx context.Context, c *rgc.Cell) ([]float64, *CellReport, error) {
	d := cf.d
	cf.y = spikeIndicator(c.SpikeBins, d.n)
	tr := d.splits[rgc.Train]
	spikes := 0
	for _, s := range cf.y[tr[0]:tr[1]] {
		if s {
			spikes++
		}
	}
	if spikes == 0 {
		return nil, nil, fmt.Errorf("no spike in the training split (bins %d..%d)", tr[0], tr[1]-1)
	}
	histDesign(cf.y, d.hb, cf.hist)
	copy(cf.ms[1:], d.stimMS)
	for k := 0; k < d.nh; k++ {
		m := 0.0
		for u := tr[0]; u < tr[1]; u++ {
			v := float64(cf.hist[u*d.nh+k])
			m += v * v
		}
		cf.ms[1+d.ns+k] = m / float64(tr[1]-tr[0])
	}
	for k := 1; k < d.p; k++ {
		if cf.ms[k] == 0 {
			cf.ms[k] = 1 // a column that is zero on train: keep its weight at 0
		}
	}

	rep := &CellReport{ClusterID: c.ClusterID, TrainSpikeBins: spikes}
	ntr := float64(tr[1] - tr[0])
	pc := float64(spikes) / ntr
	lam := -math.Log1p(-pc)
	theta := make([]float64, d.p)
	theta[0] = math.Log(lam)
	if va := d.splits[rgc.Val]; va[1] > va[0] {
		sum := 0.0
		for u := va[0]; u < va[1]; u++ {
			sum += binNLL(theta[0], cf.y[u])
		}
		rep.ConstValNLL = sum / float64(va[1]-va[0])
	}
	var best []float64
	bestVal := math.Inf(1)
	for _, alpha := range cf.opts.Alphas {
		it, err := cf.newton(ctx, theta, alpha)
		rep.Iterations += it
		if err != nil {
			return nil, nil, err
		}
		v := cf.meanNLL(theta, rgc.Val)
		rep.ValNLLByAlpha = append(rep.ValNLLByAlpha, v)
		if best == nil || v < bestVal {
			best, bestVal, rep.Alpha = append([]float64(nil), theta...), v, alpha
		}
	}
	rep.ValNLL = bestVal
	rep.TrainNLL = cf.meanNLL(best, rgc.Train)
	rep.TestNLL = cf.meanNLL(best, rgc.Test)
	return best, rep, nil
}

// newtonTol is the Newton decrement (the predicted loss decrease, total
// nats over the training bins) below which a fit has converged.
const newtonTol = 1e-4

// newton minimises the penalised loss from theta (updated in place) by
// damped Newton steps with an exact gradient and a Hessian from
// curvature-weighted systematic sampling of the bins, returning the number
// of iterations.
func (cf *cellFit) newton(ctx context.Context, theta []float64, alpha float64) (int, error) {
	d := cf.d
	p := d.p
	tr := d.splits[rgc.Train]
	cur := cf.loss(theta, alpha, cf.eta)
	trial := make([]float64, p)
	step := make([]float64, p)
	for it := 0; it < cf.opts.MaxIter; it++ {
		if err := ctx.Err(); err != nil {
			return it, err
		}
		// Gradient (exact) and curvature weights.
		clear(cf.grad)
		gs, gh := cf.grad[1:1+d.ns], cf.grad[1+d.ns:]
		sumW := 0.0
		for i, e := range cf.eta {
			u := tr[0] + i
			g, h := binDeriv(e, cf.y[u])
			cf.w[i] = h
			sumW += h
			cf.grad[0] += g
			for k, v := range d.stim[u*d.ns : (u+1)*d.ns] {
				gs[k] += g * float64(v)
			}
			for k, v := range cf.hist[u*d.nh : (u+1)*d.nh] {
				gh[k] += g * float64(v)
			}
		}
		for k := 1; k < p; k++ {
			cf.grad[k] += alpha * cf.ms[k] * theta[k]
		}
		// Hessian: every bin whose weight reaches tau, the others by
		// systematic sampling with weight tau (unbiased in expectation).
		clear(cf.hess)
		tau := 0.0
		if rows := cf.opts.HessianRows; rows > 0 && rows < len(cf.w) {
			tau = sumW / float64(rows)
		}
		acc := tau / 2
		for i, h := range cf.w {
			wt := h
			if h < tau {
				acc += h
				if acc < tau {
					continue
				}
				acc -= tau
				wt = tau
			}
			if wt == 0 {
				continue
			}
			cf.row(tr[0] + i)
			for a := 0; a < p; a++ {
				xa := wt * cf.x[a]
				if xa == 0 {
					continue
				}
				hr := cf.hess[a*p : (a+1)*p]
				for b := a; b < p; b++ {
					hr[b] += xa * cf.x[b]
				}
			}
		}
		for k := 1; k < p; k++ {
			cf.hess[k*p+k] += alpha * cf.ms[k]
		}
		if err := solveSym(cf.hess, cf.grad, step, p); err != nil {
			return it, err
		}
		dec := 0.0 // -grad . step, step = -H^-1 grad
		for k := range step {
			step[k] = -step[k]
			dec -= cf.grad[k] * step[k]
		}
		if !(dec > 2*newtonTol) {
			return it, nil
		}
		// Backtracking line search (Armijo).
		t := 1.0
		accepted := false
		for ls := 0; ls < 40; ls++ {
			for k := range trial {
				trial[k] = theta[k] + t*step[k]
			}
			l := cf.loss(trial, alpha, cf.etaT)
			if l <= cur-1e-4*t*dec {
				copy(theta, trial)
				cf.eta, cf.etaT = cf.etaT, cf.eta
				improved := cur - l
				cur = l
				accepted = true
				if improved < newtonTol {
					return it + 1, nil
				}
				break
			}
			t /= 2
		}
		if !accepted {
			return it + 1, nil // no further decrease within rounding
		}
	}
	return cf.opts.MaxIter, nil
}

// solveSym solves H x = g for the symmetric positive definite p x p matrix
// whose upper triangle is in h, by Cholesky factorisation; a factorisation
// that fails (rounding) is retried with a small ridge.
func solveSym(h, g, x []float64, p int) error {
	a := mat.NewSymDense(p, nil)
	tr := 0.0
	for i := 0; i < p; i++ {
		for j := i; j < p; j++ {
			a.SetSym(i, j, h[i*p+j])
		}
		tr += h[i*p+i]
	}
	var ch mat.Cholesky
	for ridge := 0.0; ridge < tr; ridge = max(ridge*100, 1e-12*tr/float64(p)) {
		if ridge > 0 {
			for i := 0; i < p; i++ {
				a.SetSym(i, i, h[i*p+i]+ridge)
			}
		}
		if ch.Factorize(a) {
			out := mat.NewVecDense(p, x)
			if err := ch.SolveVecTo(out, mat.NewVecDense(p, g)); err != nil && !errors.As(err, new(mat.Condition)) {
				return fmt.Errorf("newton step: %w", err)
			}
			return nil
		}
	}
	return errors.New("newton step: the Hessian is not positive definite")
}
