// Package train trains the spike-prediction models of package model with
// the gorgonia graph of package model/graph, following
// docs/model.md section 3: AdamW, a one-cycle learning-rate
// schedule, validation at regular steps, the best checkpoint by validation
// loss, early stopping on the smoothed validation loss, resumable runs, and
// a learning-rate range test.
package train

import (
	"math"

	"rgcpred/model"
)

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter,
// "Decoupled weight decay regularization", ICLR 2019; Kingma & Ba, "Adam",
// 2015). Weight decay applies to model.KindWeight tensors only.
type AdamW struct {
	// Beta1 and Beta2 are the moment decay rates, Eps the denominator
	// guard and WeightDecay the decoupled decay factor (scaled by the LR).
	Beta1, Beta2, Eps, WeightDecay float64
	// Step is the number of updates taken.
	Step int
	// M and V are the first and second moment estimates per tensor.
	M, V map[string][]float32

	// params are the parameters of the weights last updated (w), kept so
	// that a step allocates nothing.
	w      *model.Weights
	params []model.ParamSpec
}

// NewAdamW returns the optimiser of the spec: beta 0.9/0.99, eps 1e-5,
// weight decay 0.02.
func NewAdamW() *AdamW {
	return &AdamW{Beta1: 0.9, Beta2: 0.99, Eps: 1e-5, WeightDecay: 0.02,
		M: map[string][]float32{}, V: map[string][]float32{}}
}

// Update takes one step with learning rate lr on the trainable tensors of w
// (every kind but model.KindStat), reading each gradient from grad.
func (o *AdamW) Update(w *model.Weights, grad func(name string) []float32, lr float64) {
	o.Step++
	bc1 := 1 - math.Pow(o.Beta1, float64(o.Step))
	bc2 := 1 - math.Pow(o.Beta2, float64(o.Step))
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	stepSize := float32(lr / bc1)
	sqrtBC2 := float32(math.Sqrt(bc2))
	eps := float32(o.Eps)
	if o.w != w {
		o.w, o.params = w, w.Config.Params()
	}
	for _, p := range o.params {
		if p.Kind == model.KindStat {
			continue
		}
		x, g := w.Tensors[p.Name], grad(p.Name)
		if g == nil {
			continue
		}
		m, v := o.M[p.Name], o.V[p.Name]
		if m == nil {
			m, v = make([]float32, len(x)), make([]float32, len(x))
			o.M[p.Name], o.V[p.Name] = m, v
		}
		decay := float32(1)
		if p.Kind == model.KindWeight {
			decay = float32(1 - lr*o.WeightDecay)
		}
		for i, gi := range g {
			m[i] = b1*m[i] + (1-b1)*gi
			v[i] = b2*v[i] + (1-b2)*gi*gi
			den := float32(math.Sqrt(float64(v[i])))/sqrtBC2 + eps
			x[i] = x[i]*decay - stepSize*m[i]/den
		}
	}
}

// OneCycle is the one-cycle learning-rate schedule (Smith & Topin,
// "Super-convergence", 2018, in the fastai form): a cosine warm-up from
// Peak/DivStart to Peak over the first WarmFrac of the steps, a cosine
// anneal to Peak/DivStart until AnnealEnd, and a final cosine decay to
// Peak/DivFinal.
type OneCycle struct {
	// Peak is the maximum learning rate; Total the number of steps.
	Peak  float64
	Total int
	// WarmFrac is the fraction of Total spent warming up and AnnealEnd the
	// fraction at which the anneal ends and the final decay starts.
	WarmFrac  float64
	AnnealEnd float64
	// DivStart and DivFinal divide Peak to give the starting and final
	// learning rates.
	DivStart float64
	DivFinal float64
}

// NewOneCycle returns the schedule used by the trainer: 25% warm-up from
// peak/25, anneal to peak/25 at 90% of the steps, final decay to peak/1e4.
func NewOneCycle(peak float64, total int) OneCycle {
	return OneCycle{Peak: peak, Total: total, WarmFrac: 0.25, AnnealEnd: 0.9, DivStart: 25, DivFinal: 1e4}
}

func cosInterp(a, b, f float64) float64 { return b + (a-b)*(1+math.Cos(math.Pi*f))/2 }

// Rate returns the learning rate of step (0-based).
func (s OneCycle) Rate(step int) float64 {
	if s.Total <= 1 {
		return s.Peak
	}
	return s.RateAt(float64(step) / float64(s.Total-1))
}

// RateAt returns the learning rate at fraction f (0..1) of the run.
func (s OneCycle) RateAt(f float64) float64 {
	f = math.Min(math.Max(f, 0), 1)
	lo := s.Peak / s.DivStart
	switch {
	case f < s.WarmFrac:
		return cosInterp(lo, s.Peak, f/s.WarmFrac)
	case f < s.AnnealEnd:
		return cosInterp(s.Peak, lo, (f-s.WarmFrac)/(s.AnnealEnd-s.WarmFrac))
	default:
		return cosInterp(lo, s.Peak/s.DivFinal, math.Min(1, (f-s.AnnealEnd)/(1-s.AnnealEnd)))
	}
}

// EarlyStop implements the spec's rule: the validation loss smoothed by an
// exponential moving average with factor 0.8 must improve within Patience
// evaluations, checked only once half the steps are done.
type EarlyStop struct {
	// Factor is the moving-average weight of the previous smoothed loss.
	Factor float64
	// Patience is how many evaluations may pass without improvement.
	Patience int
	// Smoothed is the current smoothed loss; Best the lowest seen.
	Smoothed float64
	Best     float64
	Since    int // evaluations since Best improved
	N        int // evaluations seen
}

// NewEarlyStop returns the spec's rule: factor 0.8, patience 12.
func NewEarlyStop() *EarlyStop { return &EarlyStop{Factor: 0.8, Patience: 12, Best: math.Inf(1)} }

// Observe records a validation loss and reports whether training should
// stop, given whether half the steps are done.
func (e *EarlyStop) Observe(loss float64, pastHalf bool) bool {
	if e.N == 0 {
		e.Smoothed = loss
	} else {
		e.Smoothed = e.Factor*e.Smoothed + (1-e.Factor)*loss
	}
	e.N++
	if e.Smoothed < e.Best {
		e.Best, e.Since = e.Smoothed, 0
	} else {
		e.Since++
	}
	return pastHalf && e.Since >= e.Patience
}
