package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"time"

	"rgcpred/base/cputime"
	"rgcpred/model"
	"rgcpred/model/graph"
	"rgcpred/rgc"
)

// session is one training session of a run: the weights and state, the
// training graph, the validation evaluator, the batch loader and the
// clocks.
type session struct {
	ctx   context.Context
	o     *Options
	w     *model.Weights
	vw    *model.Weights // the weights validated and saved as best: w, or the average (st.EMA)
	st    *state
	tg    stepGraph
	ev    *evaluator
	ld    *loader
	stop  context.CancelFunc // stops the loader
	soft  []float32          // distillation targets [Batch][Classes]
	sched OneCycle
	res   Result

	start    time.Time
	elapsed0 float64 // training seconds of earlier sessions
	step0    int     // the step this session started at

	// Validation time (scoring and saving checkpoints), in seconds: this
	// session's and since the last progress line. A rate "in steps" leaves
	// it out; the run's rate includes it.
	valSecs, valSinceLog float64

	// Progress lines: the last one's time and step, the cores kept busy
	// since (validation included), and the training loss's exponential
	// moving average over emaN steps.
	lastLog    time.Time
	stepsAtLog int
	meter      cputime.Meter
	trainEMA   float64
	emaN       int
}

// newSession builds the graphs and the validation set, scores the
// zero-input models, starts a fresh model at the zero-input model, starts
// the weight average (Options.EMA) of a new run there, and starts the
// batch loader. The evaluator reads the average when there is one, in
// place (a validation packs it for the engine), so a step allocates
// nothing for it.
func newSession(ctx context.Context, o *Options, w *model.Weights, st *state) (*session, error) {
	tg, err := newStepGraph(w, o.Batch, o.Threads, o.Replicas, graph.Options{Training: true, SoftTargets: o.Distill > 0,
		BF16: o.Precision == PrecisionBF16})
	if err != nil {
		return nil, err
	}
	val, err := newValSet(o.Rec, rgc.Val, o.Cells, o.ValWindows, 0xa11d)
	if err != nil {
		tg.Close()
		return nil, fmt.Errorf("validation set: %w", err)
	}
	// The zero-input models, scored on this run's validation set (which a
	// resumed run may draw at another size).
	pooled, perCell := ClassFrequencies(o.Rec, rgc.Train, o.Cells)
	st.ZeroPooled, st.ZeroCell = val.zeroInputNLL(pooled, perCell)
	if o.Resume == "" && o.Init == "" {
		initHeadBias(w, pooled)
	}
	if o.EMA != 0 && st.EMA == nil {
		st.EMA = NewEMA(w, o.EMA)
	}
	vw := st.validated(w)
	ev := newEvaluator(vw, val, o.Batch, o.Threads)
	fmt.Fprintf(o.Log, "%s on %s: %d cells, %d params, batch %d, %s, peak lr %.3g; zero-input val NLL %.4f (pooled), %.4f (per cell) on %d windows\n",
		o.Config.Name(), o.Data, len(o.Cells), o.Config.CountParams(""), o.Batch, runPlan(o.Steps, st.Budget), o.LR, st.ZeroPooled, st.ZeroCell,
		len(val.targets))
	fmt.Fprintf(o.Log, "arithmetic: %s; validation in fp32\n", o.Precision.describe())
	if o.Replicas > 1 {
		fmt.Fprintf(o.Log, "data parallel: %d replicas of %d windows on %d thread(s) each; batch norm's training statistics per replica\n",
			o.Replicas, o.Batch/o.Replicas, o.Threads/o.Replicas)
	}
	if st.EMA != nil {
		fmt.Fprintf(o.Log, "weight average: decay min(%g, (1+t)/(10+t)) at step t; validation, early stopping and the best checkpoint use it\n",
			st.EMA.Decay)
	}
	if st.Distill > 0 {
		fmt.Fprintf(o.Log, "distilling: the teacher's share of the targets falls from %.2f to 0 at %.0f%% of the run\n", st.Distill, 100*st.DistillEnd)
	}

	lctx, stop := context.WithCancel(ctx)
	var teacher rgc.Predictor
	if o.Distill > 0 {
		teacher = o.Teacher
	}
	now := time.Now()
	return &session{
		ctx: ctx, o: o, w: w, vw: vw, st: st, tg: tg, ev: ev, stop: stop,
		ld:    newLoader(lctx, o.Rec, rgc.Train, o.Cells, o.Batch, o.Seed^uint64(st.Step)*0x9e3779b97f4a7c15, teacher),
		soft:  make([]float32, o.Batch*o.Config.Classes),
		sched: NewOneCycle(o.LR, o.Steps),
		start: now, elapsed0: st.Elapsed, step0: st.Step, lastLog: now, stepsAtLog: st.Step, meter: cputime.Start(),
	}, nil
}

// close stops the loader and releases the training graph.
func (s *session) close() {
	s.stop()
	s.tg.Close()
}

// elapsed is the training time in seconds, earlier sessions included.
func (s *session) elapsed() float64 { return s.elapsed0 + time.Since(s.start).Seconds() }

// frac is the fraction of the run done: of the steps, or of the time
// budget when there is one.
func (s *session) frac() float64 {
	f := float64(s.st.Step) / float64(s.o.Steps)
	if s.st.Budget > 0 {
		f = math.Max(f, s.elapsed()/s.st.Budget)
	}
	return f
}

// loop takes optimiser steps until the plan is done, early stopping
// triggers (res.Stopped) or the context ends.
func (s *session) loop() error {
	o, st := s.o, s.st
	for st.Step < o.Steps && s.frac() < 1 {
		var b *batch
		select {
		case <-s.ctx.Done():
		case b = <-s.ld.out:
		}
		if b == nil {
			return nil
		}
		loss, lr, err := s.step(b)
		if err != nil {
			return fmt.Errorf("step %d: %w", st.Step, err)
		}
		s.progress(loss, lr)
		if st.Step%o.ValEvery == 0 || st.Step == o.Steps || s.frac() >= 1 {
			t0 := time.Now()
			stop, err := s.validate()
			dv := time.Since(t0).Seconds()
			s.valSecs += dv
			s.valSinceLog += dv
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("step %d: %w", st.Step, err)
			}
			if stop {
				fmt.Fprintf(o.Log, "early stop at step %d: smoothed val NLL not improved for %d evaluations\n", st.Step, st.Stop.Patience)
				s.res.Stopped = true
				return nil
			}
		}
	}
	return nil
}

// step runs one optimiser step on batch b (handing b back to the loader)
// and returns its loss and learning rate.
func (s *session) step(b *batch) (loss float32, lr float64, err error) {
	o, st := s.o, s.st
	if b.err != nil {
		return 0, 0, b.err
	}
	if err := s.tg.SetInputs(b.inputs, b.rows, b.targets); err != nil {
		return 0, 0, err
	}
	if a := distillWeight(st.Distill, st.DistillEnd, s.frac()); a > 0 {
		mixTargets(s.soft, b.teacher, b.targets, a, o.Config.Classes)
		if err := s.tg.SetTargetDist(s.soft); err != nil {
			return 0, 0, fmt.Errorf("teacher targets: %w", err)
		}
	}
	s.ld.free <- b
	loss, err = s.tg.Run()
	if err != nil {
		return 0, 0, err
	}
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return 0, 0, fmt.Errorf("loss is %v (learning rate %.3g too high?)", loss, o.LR)
	}
	lr = s.sched.Rate(st.Step)
	if st.Budget > 0 {
		lr = s.sched.RateAt(s.frac())
	}
	st.Opt.Update(s.w, s.tg.Grad, lr)
	if st.EMA != nil {
		st.EMA.Update(s.w)
	}
	st.Step++
	st.History = append(st.History, Point{Step: st.Step, TrainLoss: float64(loss), Val: math.NaN(), LR: lr,
		ElapsedSecs: s.elapsed()})
	return loss, lr, nil
}

// progress updates the smoothed training loss and prints a progress line
// every ProgressEvery and at the last planned step.
func (s *session) progress(loss float32, lr float64) {
	o, st := s.o, s.st
	s.emaN++
	s.trainEMA = 0.98*s.trainEMA + 0.02*float64(loss)
	if time.Since(s.lastLog) < o.ProgressEvery && st.Step != o.Steps {
		return
	}
	smoothed := s.trainEMA / (1 - math.Pow(0.98, float64(s.emaN)))
	dt := time.Since(s.lastLog).Seconds()
	n := float64(st.Step - s.stepsAtLog)
	sps := n / dt
	eta := time.Duration(float64(o.Steps-st.Step) / sps * float64(time.Second)).Round(time.Second)
	if st.Budget > 0 {
		eta = min(eta, time.Duration((1-s.frac())*st.Budget*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(o.Log, "%s  lr %.3g  loss %.4f  val %s  %.2f steps/s  %.1f samples/s (%.1f in steps, validation %.1fs)  %.2f cores  ETA %s\n",
		progressPos(st.Step, o.Steps, s.elapsed(), st.Budget), lr, smoothed, bestVal(st.BestVal), sps, sps*float64(o.Batch),
		stepRate(n*float64(o.Batch), dt, s.valSinceLog), s.valSinceLog, s.meter.Cores(), eta)
	s.lastLog, s.stepsAtLog, s.meter, s.valSinceLog = time.Now(), st.Step, cputime.Start(), 0
}

// runPlan is a run's length for its log: "2000 steps", or with a time
// budget of budget seconds "a 2m0s budget" (", at most N steps" when it
// has a step cap below maxSteps).
func runPlan(steps int, budget float64) string {
	if budget <= 0 {
		return fmt.Sprintf("%d steps", steps)
	}
	plan := fmt.Sprintf("a %s budget", time.Duration(budget*float64(time.Second)).Round(time.Second))
	if steps < maxSteps {
		plan += fmt.Sprintf(", at most %d steps", steps)
	}
	return plan
}

// progressPos is where a progress line stands in the run: "step 64/2000"
// for a step-bound run; with a time budget of budget seconds the training
// time used too, "step 64  1m30s of 2m0s", the step count without its
// "/N" when the run has no step cap (maxSteps).
func progressPos(step, steps int, elapsed, budget float64) string {
	pos := fmt.Sprintf("step %d/%d", step, steps)
	if steps >= maxSteps {
		pos = fmt.Sprintf("step %d", step)
	}
	if budget > 0 {
		sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)).Round(time.Second) }
		pos += fmt.Sprintf("  %s of %s", sec(elapsed), sec(budget))
	}
	return pos
}

// bestVal is a progress line's best validation NLL: "-" before the first
// validation.
func bestVal(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.4f", v)
}

// stepRate is the rate of samples over secs seconds of which val went to
// validation: the training steps' own speed, what a benchmark of a step
// measures, where the run's rate (samples/secs) also pays for scoring
// the validation windows and saving checkpoints.
func stepRate(samples, secs, val float64) float64 {
	if secs-val <= 0 {
		return 0
	}
	return samples / (secs - val)
}

// validate scores the validation set, records the result, saves the
// resume checkpoint and, when the loss improved, the best checkpoint; it
// reports whether early stopping says to stop. With a weight average all
// three are the average's.
func (s *session) validate() (stop bool, err error) {
	o, st := s.o, s.st
	v, err := s.ev.nll(s.ctx)
	if err != nil {
		return false, err
	}
	if len(st.History) > 0 {
		st.History[len(st.History)-1].Val = v
	}
	improved := v < st.BestVal
	if improved {
		st.BestVal, st.BestStep = v, st.Step
	}
	stop = st.Stop.Observe(v, s.frac() >= 0.5)
	fmt.Fprintf(o.Log, "step %d: val NLL %.4f (smoothed %.4f, best %.4f at step %d; zero-input %.4f/%.4f)\n",
		st.Step, v, st.Stop.Smoothed, st.BestVal, st.BestStep, st.ZeroPooled, st.ZeroCell)
	// The resume checkpoint goes first and records the new best: if the
	// run stops before the best checkpoint is written, its weights are the
	// best ones and resuming writes them (reconcileBest); a resumed run
	// never believes in a best it cannot find on disk.
	if err := s.saveResume(); err != nil {
		return false, fmt.Errorf("save resume checkpoint: %w", err)
	}
	if o.afterResumeSave != nil {
		if err := o.afterResumeSave(); err != nil {
			return false, err
		}
	}
	if improved {
		ck := o.checkpoint(s.vw, st, v)
		if err := ck.Save(o.Out); err != nil {
			return false, fmt.Errorf("save best checkpoint: %w", err)
		}
	}
	return stop, nil
}

// saveResume writes the resume checkpoint: the current (raw) weights and
// the gob-encoded training state, which holds the weight average if any.
func (s *session) saveResume() error {
	o, st := s.o, s.st
	st.Elapsed = s.elapsed()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(st); err != nil {
		return fmt.Errorf("encode training state: %w", err)
	}
	// The validation NLL is that of the last validation, when it was at
	// this step (of the average, when the run keeps one): its presence
	// marks a resume checkpoint written right after a validation.
	ck := o.checkpoint(s.w, st, 0)
	if n := len(st.History); n > 0 && !math.IsNaN(st.History[n-1].Val) {
		ck.Provenance.ValNLL = st.History[n-1].Val
	}
	ck.TrainState = buf.Bytes()
	return ck.Save(o.Out + ".resume")
}

// finish stops the loader, saves the resume checkpoint and the loss curve,
// and summarises the run.
func (s *session) finish() (*Result, error) {
	o, st, res := s.o, s.st, &s.res
	s.stop()
	res.Interrupted = s.ctx.Err() != nil && st.Step < o.Steps && s.frac() < 1 && !res.Stopped
	if err := s.saveResume(); err != nil {
		return nil, fmt.Errorf("train: save resume checkpoint: %w", err)
	}
	if res.Interrupted {
		fmt.Fprintf(o.Log, "interrupted at step %d; resume with --resume %s\n", st.Step, o.Out+".resume")
	}
	if err := o.plotCurve(st); err != nil {
		fmt.Fprintf(o.Log, "loss curve: %v\n", err)
	}
	res.Steps, res.BestVal, res.BestStep = st.Step, st.BestVal, st.BestStep
	res.ZeroPooled, res.ZeroPerCel = st.ZeroPooled, st.ZeroCell
	res.Elapsed = time.Duration(s.elapsed() * float64(time.Second))
	if len(st.History) > 0 && res.Elapsed > 0 {
		res.SamplesPerSec = float64(st.Step*o.Batch) / res.Elapsed.Seconds()
	}
	res.Validation = time.Duration(s.valSecs * float64(time.Second))
	res.StepSamplesPerSec = stepRate(float64((st.Step-s.step0)*o.Batch), time.Since(s.start).Seconds(), s.valSecs)
	return res, nil
}
