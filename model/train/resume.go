package train

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"

	"rgcpred/model"
)

// Bounds on a run's plan, checked for the options of a new run and for the
// state of a resumed one.
const (
	// maxBatch bounds the batch size: a batch's inputs alone take
	// 20 KiB per window and the training graph's activations many times
	// that.
	maxBatch = 1 << 14
	// maxSteps bounds the planned number of steps. A time-bound run plans
	// up to math.MaxInt32 steps as "no step cap"; the history keeps one
	// point per step taken, not per step planned.
	maxSteps = math.MaxInt32
)

// decodeState decodes the training state of a resume checkpoint and checks
// every field against the checkpoint (see state.check): cfg is the
// checkpoint's model configuration and steps the step count of its
// provenance. A state that decodes but is inconsistent is an error, never
// a later panic.
func decodeState(data []byte, cfg model.Config, steps int) (*state, error) {
	// The optimiser's maps are created here, empty: gob fills an existing
	// map entry by entry as the input provides them, whereas it creates a
	// nil map with the entry count the input claims before reading any.
	// So is the average's: a state without one leaves it empty, and it is
	// dropped.
	st := &state{Opt: &AdamW{M: map[string][]float32{}, V: map[string][]float32{}}, EMA: &EMA{Tensors: map[string][]float32{}}}
	r := bytes.NewReader(data)
	if err := gob.NewDecoder(r).Decode(st); err != nil {
		return nil, fmt.Errorf("decode training state: %w", err)
	}
	if e := st.EMA; e.Decay == 0 && e.Step == 0 && len(e.Tensors) == 0 {
		st.EMA = nil
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("training state: %d trailing bytes", r.Len())
	}
	if err := st.check(cfg, steps); err != nil {
		return nil, fmt.Errorf("training state: %w", err)
	}
	return st, nil
}

// RecordedBest reads the training state of resume checkpoint ck and
// returns the best validation loss it records and its step; ok is false
// before the run's first validation. A run that recorded a best loss saved
// a best checkpoint with it.
func RecordedBest(ck *model.Checkpoint) (step int, val float64, ok bool, err error) {
	if len(ck.TrainState) == 0 {
		return 0, 0, false, errors.New("no training state")
	}
	st, err := decodeState(ck.TrainState, ck.Weights.Config, ck.Provenance.Steps)
	if err != nil {
		return 0, 0, false, err
	}
	return st.BestStep, st.BestVal, !math.IsInf(st.BestVal, 1), nil
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// check validates a decoded training state: a plan of 1..maxSteps steps
// and batches of 1..maxBatch windows with a finite positive rate; the step
// count equal to the checkpoint's (steps) and the optimiser's, within the
// plan; finite, non-negative times and budget; a distillation schedule in
// range; a best validation loss that is finite (or +Inf before the first
// validation) at a step already taken; the optimiser's hyper-parameters in
// range and its moments exactly the trainable tensors of cfg, finite (the
// second moments non-negative); the early-stopping state consistent; a
// weight average, if any, valid (EMA.check); and a history of at most one
// point per step, ascending, with finite training losses, rates and times
// (a validation loss is NaN between validations).
func (st *state) check(cfg model.Config, steps int) error {
	switch {
	case st.Steps < 1 || st.Steps > maxSteps:
		return fmt.Errorf("planned steps %d, want 1..%d", st.Steps, maxSteps)
	case st.Step < 0 || st.Step > st.Steps:
		return fmt.Errorf("step %d outside the plan of %d steps", st.Step, st.Steps)
	case st.Step != steps:
		return fmt.Errorf("step %d, but the checkpoint's provenance says %d steps", st.Step, steps)
	case st.Batch < 1 || st.Batch > maxBatch:
		return fmt.Errorf("batch %d, want 1..%d", st.Batch, maxBatch)
	case !finite(st.LR) || st.LR <= 0:
		return fmt.Errorf("learning rate %v, want a finite rate > 0", st.LR)
	case !finite(st.Budget) || st.Budget < 0:
		return fmt.Errorf("time budget %v s, want a finite value >= 0", st.Budget)
	case !finite(st.Elapsed) || st.Elapsed < 0:
		return fmt.Errorf("elapsed time %v s, want a finite value >= 0", st.Elapsed)
	case !(st.Distill >= 0 && st.Distill <= 1):
		return fmt.Errorf("distillation weight %v, want 0..1", st.Distill)
	case st.Distill > 0 && (!(st.DistillEnd > 0) || math.IsInf(st.DistillEnd, 0)):
		return fmt.Errorf("distillation end %v, want a positive fraction of the run", st.DistillEnd)
	case st.BestStep < 0 || st.BestStep > st.Step:
		return fmt.Errorf("best step %d outside the %d steps taken", st.BestStep, st.Step)
	case math.IsNaN(st.BestVal) || math.IsInf(st.BestVal, -1) || (math.IsInf(st.BestVal, 1) && st.BestStep != 0):
		return fmt.Errorf("best validation loss %v at step %d, want a finite loss (or +Inf at step 0 before any validation)", st.BestVal, st.BestStep)
	case st.Precision != "" && st.Precision != PrecisionFP32 && st.Precision != PrecisionBF16:
		return fmt.Errorf("precision %q, want %q or %q", st.Precision, PrecisionFP32, PrecisionBF16)
	}
	if err := st.Opt.check(cfg, st.Step); err != nil {
		return fmt.Errorf("optimiser: %w", err)
	}
	if err := st.Stop.check(st.Step); err != nil {
		return fmt.Errorf("early stopping: %w", err)
	}
	if st.EMA != nil {
		if err := st.EMA.check(cfg, st.Step); err != nil {
			return fmt.Errorf("weight average: %w", err)
		}
	}
	if len(st.History) > st.Step {
		return fmt.Errorf("history of %d points for %d steps", len(st.History), st.Step)
	}
	prev := 0
	for i, p := range st.History {
		switch {
		case p.Step <= prev || p.Step > st.Step:
			return fmt.Errorf("history[%d] at step %d, want after step %d and at most %d", i, p.Step, prev, st.Step)
		case !finite(p.TrainLoss):
			return fmt.Errorf("history[%d] (step %d): training loss %v is not finite", i, p.Step, p.TrainLoss)
		case !finite(p.LR) || p.LR < 0:
			return fmt.Errorf("history[%d] (step %d): learning rate %v, want finite and >= 0", i, p.Step, p.LR)
		case !finite(p.ElapsedSecs) || p.ElapsedSecs < 0:
			return fmt.Errorf("history[%d] (step %d): elapsed time %v s, want finite and >= 0", i, p.Step, p.ElapsedSecs)
		}
		prev = p.Step
	}
	return nil
}

// check validates an optimiser restored after step updates of a model of
// configuration cfg: decay rates in [0, 1), a positive epsilon, a
// non-negative decay, the step count, and first and second moments for
// the same trainable tensors, each of the tensor's size, finite, the second
// moments non-negative.
func (o *AdamW) check(cfg model.Config, step int) error {
	if o == nil {
		return errors.New("missing")
	}
	switch {
	case !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1):
		return fmt.Errorf("betas %v, %v, want [0, 1)", o.Beta1, o.Beta2)
	case !finite(o.Eps) || o.Eps <= 0:
		return fmt.Errorf("epsilon %v, want finite and > 0", o.Eps)
	case !finite(o.WeightDecay) || o.WeightDecay < 0:
		return fmt.Errorf("weight decay %v, want finite and >= 0", o.WeightDecay)
	case o.Step != step:
		return fmt.Errorf("%d updates for %d training steps", o.Step, step)
	}
	sizes := map[string]int{}
	for _, p := range cfg.Params() {
		if p.Kind != model.KindStat {
			sizes[p.Name] = p.Size()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.M)) { // keys in order: errors independent of map order
		m, v := o.M[name], o.V[name]
		size, ok := sizes[name]
		switch {
		case !ok:
			return fmt.Errorf("moments of %q, not a trainable tensor of %s", name, cfg.Name())
		case v == nil:
			return fmt.Errorf("first but no second moments of %s", name)
		case len(m) != size || len(v) != size:
			return fmt.Errorf("moments of %s hold %d and %d values, the tensor %d", name, len(m), len(v), size)
		}
		for i := range m {
			if !finite(float64(m[i])) || !finite(float64(v[i])) || v[i] < 0 {
				return fmt.Errorf("moments of %s[%d] are %v, %v: want finite, the second >= 0", name, i, m[i], v[i])
			}
		}
	}
	for name := range o.V {
		if _, ok := o.M[name]; !ok {
			return fmt.Errorf("second but no first moments of %q", name)
		}
	}
	return nil
}

// check validates the early-stopping state after step training steps: a
// factor in [0, 1), a patience of at least one evaluation, at most one
// evaluation per step, counts that agree, and a best smoothed loss that is
// a number (+Inf before the first evaluation). The smoothed loss itself
// may be anything a validation produced: comparisons with it cannot fail.
func (e *EarlyStop) check(step int) error {
	switch {
	case e == nil:
		return errors.New("missing")
	case !(e.Factor >= 0 && e.Factor < 1):
		return fmt.Errorf("factor %v, want [0, 1)", e.Factor)
	case e.Patience < 1:
		return fmt.Errorf("patience %d, want >= 1", e.Patience)
	case e.N < 0 || e.N > step:
		return fmt.Errorf("%d evaluations after %d steps", e.N, step)
	case e.Since < 0 || e.Since > e.N:
		return fmt.Errorf("%d evaluations since the best of %d", e.Since, e.N)
	case math.IsNaN(e.Best) || math.IsInf(e.Best, -1):
		return fmt.Errorf("best smoothed loss %v, want a number above -Inf", e.Best)
	case e.N == 0 && !math.IsInf(e.Best, 1):
		return fmt.Errorf("best smoothed loss %v before any evaluation, want +Inf", e.Best)
	}
	return nil
}

// reconcileBest makes a resumed run's record of its best validation loss
// agree with the best checkpoint actually at o.Out, so the run never
// replaces a better best checkpoint by a worse one, whenever the previous
// session stopped. A validation that improves saves the resume checkpoint
// (recording the new best) before the best checkpoint; when the session
// stopped between the two, the resume checkpoint's weights (or, in a run
// that averages them, its state's average) are the best weights
// (st.BestStep == st.Step) and better than those on disk, and they are
// written to o.Out here. Otherwise the best on disk is authoritative:
// st takes its loss and step (+Inf and 0 when there is none, or it is
// unreadable or of another model). resume is the resume checkpoint.
func (o *Options) reconcileBest(st *state, resume *model.Checkpoint) error {
	diskVal, diskStep := math.Inf(1), 0
	best, err := model.LoadCheckpoint(o.Out)
	switch {
	case err == nil && best.Weights.Config == resume.Weights.Config && slices.Equal(best.CellIDs, resume.CellIDs) && !math.IsNaN(best.Provenance.ValNLL):
		diskVal, diskStep = best.Provenance.ValNLL, best.Provenance.Steps
	case err == nil:
		fmt.Fprintf(o.Log, "resume: %s is not a best checkpoint of this run (model, cells or loss differ); it will be replaced\n", o.Out)
	case errors.Is(err, fs.ErrNotExist):
	default:
		fmt.Fprintf(o.Log, "resume: ignoring the best checkpoint: %v\n", err)
	}
	if st.BestStep == st.Step && st.BestVal < diskVal {
		ck := o.checkpoint(st.validated(resume.Weights), st, st.BestVal)
		if err := ck.Save(o.Out); err != nil {
			return fmt.Errorf("restore best checkpoint: %w", err)
		}
		fmt.Fprintf(o.Log, "resume: wrote the best checkpoint (val %.4f at step %d) from the resume checkpoint\n", st.BestVal, st.BestStep)
		return nil
	}
	if diskVal != st.BestVal || diskStep != st.BestStep {
		fmt.Fprintf(o.Log, "resume: best checkpoint on disk has val %.4f at step %d (the resume state recorded %.4f at step %d); keeping the one on disk\n", diskVal, diskStep, st.BestVal, st.BestStep)
		st.BestVal, st.BestStep = diskVal, diskStep
	}
	return nil
}
