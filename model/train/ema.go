package train

import (
	"errors"
	"fmt"

	"rgcpred/model"
)

// EMA is an exponential moving average of a model's weights, updated after
// each optimiser step (Polyak & Juditsky 1992; Tarvainen & Valpola 2017,
// "Mean teachers are better role models"). Late in a run the weights jitter
// around a minimum at the learning rate's step size; their average lies
// nearer its centre, as an ensemble's does.
//   - It holds a float32 copy of every tensor, trainable ones and batch-norm
//     running statistics (model.KindStat) alike.
//   - Update t (0-based) sets avg = d_t*avg + (1-d_t)*w with decay
//     d_t = min(Decay, (1+t)/(10+t)) (the num_updates rule of TensorFlow's
//     ExponentialMovingAverage).
//   - Why the warm-up: the average starts at the initial weights, which a
//     constant 0.999 would keep at a share 0.999^t (37% after 1000 steps).
//     The warm-up leaves them prod_{s<t} d_s = t! 9! / (t+9)!, below 1e-5
//     after 10 updates, and makes the average a mean over the last t/9 or
//     so steps until Decay caps it.
type EMA struct {
	// Decay is the decay d in (0, 1) once the warm-up is over.
	Decay float64
	// Step is the number of updates taken.
	Step int
	// Tensors are the averages, by parameter name.
	Tensors map[string][]float32

	// src is the weights of the last update and pairs its tensors and
	// their averages in parameter order, kept so that an update allocates
	// nothing; view is Tensors as weights (Weights).
	src   *model.Weights
	pairs []emaPair
	view  *model.Weights
}

// emaPair is one tensor and its average.
type emaPair struct{ avg, w []float32 }

// CheckEMADecay reports whether d is a valid --ema decay: 0 (off) or
// within (0, 1).
func CheckEMADecay(d float64) error {
	if d == 0 || (d > 0 && d < 1) {
		return nil
	}
	return fmt.Errorf("EMA decay %v must be within (0, 1), e.g. 0.999 (0: off)", d)
}

// NewEMA returns an average of w's tensors that starts at w's values.
func NewEMA(w *model.Weights, decay float64) *EMA {
	e := &EMA{Decay: decay, Tensors: make(map[string][]float32, len(w.Tensors))}
	for name, t := range w.Tensors {
		e.Tensors[name] = append([]float32(nil), t...)
	}
	e.bind(w)
	return e
}

// Rate returns the decay of update t (0-based): min(Decay, (1+t)/(10+t)).
func (e *EMA) Rate(t int) float64 {
	return min(e.Decay, float64(1+t)/float64(10+t))
}

// bind pairs w's tensors with their averages, in parameter order.
func (e *EMA) bind(w *model.Weights) {
	e.src, e.pairs = w, e.pairs[:0]
	for _, p := range w.Config.Params() {
		e.pairs = append(e.pairs, emaPair{avg: e.Tensors[p.Name], w: w.Tensors[p.Name]})
	}
}

// Update moves the average towards w, which must hold the tensors it
// averages: avg = d*avg + (1-d)*w with d = Rate(Step). It allocates
// nothing after the first update of a given w.
func (e *EMA) Update(w *model.Weights) {
	if e.src != w {
		e.bind(w)
	}
	d := float32(e.Rate(e.Step))
	c := 1 - d
	for _, p := range e.pairs {
		avg, x := p.avg, p.w[:len(p.avg)]
		for i, v := range x {
			avg[i] = d*avg[i] + c*v
		}
	}
	e.Step++
}

// Weights returns the averages as weights of configuration cfg, sharing
// their memory: a graph built on them evaluates the average as it is at
// each run.
func (e *EMA) Weights(cfg model.Config) *model.Weights {
	if e.view == nil || e.view.Config != cfg {
		e.view = &model.Weights{Config: cfg, Tensors: e.Tensors}
	}
	return e.view
}

// validated returns the weights a run validates, early-stops on and saves
// as its best, given its raw weights w: the average when the run keeps one
// (sharing its memory), else w itself.
func (st *state) validated(w *model.Weights) *model.Weights {
	if st.EMA == nil {
		return w
	}
	return st.EMA.Weights(w.Config)
}

// check validates an average restored after step training steps: a decay
// within (0, 1), one update per step, and exactly the tensors of cfg, of
// their sizes, finite.
func (e *EMA) check(cfg model.Config, step int) error {
	switch {
	case e == nil:
		return errors.New("missing")
	case !(e.Decay > 0 && e.Decay < 1):
		return fmt.Errorf("decay %v, want within (0, 1)", e.Decay)
	case e.Step != step:
		return fmt.Errorf("%d updates for %d training steps", e.Step, step)
	}
	return (&model.Weights{Config: cfg, Tensors: e.Tensors}).Check()
}
