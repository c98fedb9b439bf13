package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"rgcpred/internal/plot"
	"rgcpred/model"
	"rgcpred/model/graph"
	"rgcpred/rgc"
)

// Options configure a training run.
type Options struct {
	// Data names the training data for provenance (e.g. its directory).
	Data string
	// Rec is the recording; Cells are the indices into Rec.Cells to train
	// on (cell i gets embedding row i).
	Rec   *rgc.Recording
	Cells []int
	// Config is the model; its NumCells must equal len(Cells).
	Config model.Config
	// Steps is the planned number of optimiser steps, Batch the batch size,
	// LR the peak learning rate of the one-cycle schedule.
	Steps, Batch int
	LR           float64
	// ValEvery is the number of steps between validations; ValWindows the
	// size of the fixed validation subset.
	ValEvery, ValWindows int
	// TimeBudget, if positive, bounds the run by wall-clock time instead:
	// the schedule and the early-stopping half-way mark follow the
	// fraction of the budget used, and training ends when it is spent (or
	// Steps are done). For machines whose speed is not known in advance.
	TimeBudget time.Duration
	// Seed seeds initialisation and sampling.
	Seed uint64
	// Threads is the number of compute goroutines of the graph.
	Threads int
	// Out is the path of the best checkpoint; the resume checkpoint is
	// Out+".resume" and the loss curve Out without extension + "-loss.svg".
	Out string
	// Resume, if set, is a resume checkpoint to continue from.
	Resume string
	// Init, if set (and Resume is not), is a checkpoint whose weights start
	// this run instead of a fresh initialisation: a warm restart with a new
	// optimiser and schedule. Its config and cells must match the run's.
	Init string
	// Teacher, with Distill > 0, is a predictor whose class distributions
	// join the targets (knowledge distillation, Hinton et al. 2015): the
	// target of a training window is Distill' times the teacher's
	// distribution plus (1 - Distill') times the one-hot true class, where
	// Distill' falls linearly from Distill at the start to 0 at the
	// fraction DistillEnd of the run (default 0.6), so the rest of the run
	// (and its annealing) fits the true classes alone and can go beyond
	// the teacher. Validation always scores the true classes. Cat head
	// only. The teacher sees the batch's windows with recording bins as
	// ends (rgc.Batch from Recording.FillBatch), so a fitted GLM
	// (rgc/glm.Predictor), trained on the same training split, serves.
	Teacher             rgc.Predictor
	Distill, DistillEnd float64
	// Log receives progress lines (nil: os.Stderr); ProgressEvery is the
	// interval between them.
	Log           io.Writer
	ProgressEvery time.Duration
	// Notes are stored in the checkpoint's provenance.
	Notes string

	// afterResumeSave, when set, runs after a validation has saved the
	// resume checkpoint and before it saves an improved best checkpoint;
	// an error ends the run there. Tests inject faults with it (a crash
	// between the two saves).
	afterResumeSave func() error
}

// Point is one entry of the training history.
type Point struct {
	// Step is the number of optimiser steps taken.
	Step int
	// TrainLoss is the training loss at Step and Val the validation NLL.
	TrainLoss, Val float64 // Val is NaN between validations
	// LR is the learning rate used and ElapsedSecs the training time so
	// far, including earlier (resumed) sessions.
	LR, ElapsedSecs float64
}

// state is the resumable training state, stored gob-encoded in the resume
// checkpoint's TrainState.
type state struct {
	Step       int
	Steps      int
	Batch      int
	LR         float64
	Seed       uint64
	Opt        *AdamW
	Stop       *EarlyStop
	BestVal    float64
	BestStep   int
	History    []Point
	Elapsed    float64
	Budget     float64 // seconds; 0 for a step-bound run
	ZeroPooled float64
	ZeroCell   float64
	// Distill and DistillEnd are the distillation schedule (Options).
	Distill, DistillEnd float64
}

// Result summarises a finished (or interrupted) run.
type Result struct {
	// Steps is the number of steps taken; BestVal the best validation NLL,
	// reached at BestStep (the saved checkpoint).
	Steps    int
	BestVal  float64
	BestStep int
	// ZeroPooled and ZeroPerCel are the validation NLLs of the pooled and
	// per-cell zero-input models.
	ZeroPooled, ZeroPerCel float64
	// Interrupted is set when the context ended the run early; Stopped
	// when the early-stopping rule did.
	Interrupted, Stopped bool
	// Elapsed is the total training time, including resumed sessions, and
	// SamplesPerSec the training windows processed per second of it.
	Elapsed       time.Duration
	SamplesPerSec float64
}

func (o *Options) check() error {
	switch {
	case o.Rec == nil:
		return errors.New("no recording")
	case len(o.Cells) == 0:
		return errors.New("no cells to train on")
	case o.Config.NumCells != len(o.Cells):
		return fmt.Errorf("config has %d cells, training on %d", o.Config.NumCells, len(o.Cells))
	case o.Steps < 1 || o.Batch < 1:
		return fmt.Errorf("steps %d and batch %d must be >= 1", o.Steps, o.Batch)
	case o.Steps > maxSteps || o.Batch > maxBatch:
		return fmt.Errorf("steps %d and batch %d must be at most %d and %d", o.Steps, o.Batch, maxSteps, maxBatch)
	case !(o.LR > 0):
		return fmt.Errorf("learning rate %v must be > 0", o.LR)
	case o.Out == "":
		return errors.New("no output path")
	}
	if o.Distill != 0 {
		switch {
		case !(o.Distill > 0 && o.Distill <= 1):
			return fmt.Errorf("distillation weight %v must be in (0, 1]", o.Distill)
		case o.Teacher == nil:
			return errors.New("distillation needs a teacher")
		case o.Config.Head != model.HeadCat:
			return fmt.Errorf("distillation needs the cat head, not %s", o.Config.Head)
		}
		if o.DistillEnd == 0 {
			o.DistillEnd = 0.6
		}
		if !(o.DistillEnd > 0 && o.DistillEnd <= 1) {
			return fmt.Errorf("distillation end %v must be in (0, 1]", o.DistillEnd)
		}
	}
	if o.ValEvery < 1 {
		o.ValEvery = 100
	}
	if o.ValWindows < 1 {
		o.ValWindows = 2048
	}
	if o.Threads < 1 {
		o.Threads = 1
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 10 * time.Second
	}
	return nil
}

// cellIDs returns the cluster ids of the training cells.
func (o *Options) cellIDs() []int {
	ids := make([]int, len(o.Cells))
	for i, c := range o.Cells {
		ids[i] = o.Rec.Cells[c].ClusterID
	}
	return ids
}

// evaluator computes the validation NLL with an inference graph sharing
// the training weights.
type evaluator struct {
	g     *graph.Graph
	val   *valSet
	probs []float32
	in    []float32
	rows  []int
}

func newEvaluator(w *model.Weights, val *valSet, batch, threads int) (*evaluator, error) {
	g, err := graph.New(w, batch, graph.Options{Threads: threads})
	if err != nil {
		return nil, fmt.Errorf("evaluation graph: %w", err)
	}
	c := w.Config
	return &evaluator{g: g, val: val, probs: make([]float32, c.Classes),
		in: make([]float32, batch*rgc.WindowLen), rows: make([]int, batch)}, nil
}

// nll returns the mean validation NLL (class probabilities as evaluated).
func (e *evaluator) nll(ctx context.Context) (float64, error) {
	b := e.g.Batch()
	n := len(e.val.targets)
	c := e.g.Config()
	var sum float64
	for lo := 0; lo < n; lo += b {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		m := min(b, n-lo)
		for i := 0; i < b; i++ {
			j := lo + min(i, m-1) // pad the last batch by repetition
			copy(e.in[i*rgc.WindowLen:(i+1)*rgc.WindowLen], e.val.inputs[j*rgc.WindowLen:(j+1)*rgc.WindowLen])
			e.rows[i] = e.val.rows[j]
		}
		if err := e.g.SetInputs(e.in, e.rows, nil); err != nil {
			return 0, err
		}
		if _, err := e.g.Run(); err != nil {
			return 0, err
		}
		out := e.g.Output()
		k := c.HeadOut()
		for i := 0; i < m; i++ {
			sum += outputNLL(c, out[i*k:(i+1)*k], e.probs, e.val.targets[lo+i])
		}
	}
	return sum / float64(n), nil
}

// Run trains until the planned steps are done, early stopping triggers or
// ctx is cancelled (then it saves the resume checkpoint and returns with
// Interrupted set and a nil error).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	var w *model.Weights
	st := &state{Steps: o.Steps, Batch: o.Batch, LR: o.LR, Seed: o.Seed, Opt: NewAdamW(), Stop: NewEarlyStop(), BestVal: math.Inf(1),
		Budget: o.TimeBudget.Seconds(), Distill: o.Distill, DistillEnd: o.DistillEnd}
	if o.Resume != "" {
		ck, err := model.LoadCheckpoint(o.Resume)
		if err != nil {
			return nil, fmt.Errorf("train: resume: %w", err)
		}
		if len(ck.TrainState) == 0 {
			return nil, fmt.Errorf("train: resume: %s holds no training state", o.Resume)
		}
		if st, err = decodeState(ck.TrainState, ck.Weights.Config, ck.Provenance.Steps); err != nil {
			return nil, fmt.Errorf("train: resume: %s: %w", o.Resume, err)
		}
		cells, err := o.Rec.CellIndices(ck.CellIDs)
		if err != nil {
			return nil, fmt.Errorf("train: resume: %w", err)
		}
		w, o.Cells, o.Config = ck.Weights, cells, ck.Weights.Config
		o.Steps, o.Batch, o.LR, o.Seed = st.Steps, st.Batch, st.LR, st.Seed
		o.TimeBudget = time.Duration(st.Budget * float64(time.Second))
		o.Distill, o.DistillEnd = st.Distill, st.DistillEnd
		if o.Distill > 0 && o.Teacher == nil {
			return nil, fmt.Errorf("train: resume: %s was distilling from a teacher: give the teacher again", o.Resume)
		}
		if o.Distill > 0 && o.Config.Head != model.HeadCat {
			return nil, fmt.Errorf("train: resume: %s distils into a %s head; distillation needs the cat head", o.Resume, o.Config.Head)
		}
		if err := o.reconcileBest(st, ck); err != nil {
			return nil, fmt.Errorf("train: resume: %w", err)
		}
		fmt.Fprintf(o.Log, "resuming %s at step %d/%d (best val %.4f at step %d)\n", o.Resume, st.Step, st.Steps, st.BestVal, st.BestStep)
	} else if o.Init != "" {
		ck, err := model.LoadCheckpoint(o.Init)
		if err != nil {
			return nil, fmt.Errorf("train: init: %w", err)
		}
		if ck.Weights.Config != o.Config {
			return nil, fmt.Errorf("train: init: %s holds %s, not %s", o.Init, ck.Weights.Config.Name(), o.Config.Name())
		}
		cells, err := o.Rec.CellIndices(ck.CellIDs)
		if err != nil {
			return nil, fmt.Errorf("train: init: %w", err)
		}
		if !slices.Equal(cells, o.Cells) {
			return nil, fmt.Errorf("train: init: %s was trained on other cells than this run's", o.Init)
		}
		w = ck.Weights
		fmt.Fprintf(o.Log, "starting from the weights of %s\n", o.Init)
	} else {
		w = model.InitWeights(o.Config, rand.New(rand.NewPCG(o.Seed, 0x5eed)))
	}

	tg, err := graph.New(w, o.Batch, graph.Options{Training: true, Threads: o.Threads, SoftTargets: o.Distill > 0})
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer tg.Close()
	val, err := newValSet(o.Rec, rgc.Val, o.Cells, o.ValWindows, 0xa11d)
	if err != nil {
		return nil, fmt.Errorf("train: validation set: %w", err)
	}
	ev, err := newEvaluator(w, val, o.Batch, o.Threads)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer ev.g.Close()
	// The zero-input models, scored on this run's validation set (which a
	// resumed run may draw at another size).
	pooled, perCell := ClassFrequencies(o.Rec, rgc.Train, o.Cells)
	st.ZeroPooled, st.ZeroCell = val.zeroInputNLL(pooled, perCell)
	if o.Resume == "" && o.Init == "" {
		initHeadBias(w, pooled)
	}
	fmt.Fprintf(o.Log, "%s on %s: %d cells, %d params, batch %d, %d steps, peak lr %.3g; zero-input val NLL %.4f (pooled), %.4f (per cell) on %d windows\n",
		o.Config.Name(), o.Data, len(o.Cells), o.Config.CountParams(""), o.Batch, o.Steps, o.LR, st.ZeroPooled, st.ZeroCell, len(val.targets))

	if st.Distill > 0 {
		fmt.Fprintf(o.Log, "distilling: the teacher's share of the targets falls from %.2f to 0 at %.0f%% of the run\n", st.Distill, 100*st.DistillEnd)
	}
	lctx, stopLoader := context.WithCancel(ctx)
	defer stopLoader()
	var teacher rgc.Predictor
	if o.Distill > 0 {
		teacher = o.Teacher
	}
	ld := newLoader(lctx, o.Rec, rgc.Train, o.Cells, o.Batch, o.Seed^uint64(st.Step)*0x9e3779b97f4a7c15, teacher)
	soft := make([]float32, o.Batch*o.Config.Classes)
	sched := NewOneCycle(o.LR, o.Steps)

	res := &Result{}
	start := time.Now()
	elapsed0 := st.Elapsed
	lastLog := time.Now()
	stepsAtLog := st.Step
	var trainEMA float64
	emaN := 0
	// frac is the fraction of the run done: of the steps, or of the time
	// budget when there is one.
	frac := func() float64 {
		f := float64(st.Step) / float64(o.Steps)
		if st.Budget > 0 {
			f = math.Max(f, (elapsed0+time.Since(start).Seconds())/st.Budget)
		}
		return f
	}
	saveResume := func() error {
		st.Elapsed = elapsed0 + time.Since(start).Seconds()
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(st); err != nil {
			return fmt.Errorf("encode training state: %w", err)
		}
		// The current weights' validation NLL is that of the last
		// validation, when it was at this step.
		ck := o.checkpoint(w, st, 0)
		if n := len(st.History); n > 0 && !math.IsNaN(st.History[n-1].Val) {
			ck.Provenance.ValNLL = st.History[n-1].Val
		}
		ck.TrainState = buf.Bytes()
		return ck.Save(o.Out + ".resume")
	}
	validate := func() (stop bool, err error) {
		v, err := ev.nll(ctx)
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
		stop = st.Stop.Observe(v, frac() >= 0.5)
		fmt.Fprintf(o.Log, "step %d: val NLL %.4f (smoothed %.4f, best %.4f at step %d; zero-input %.4f/%.4f)\n",
			st.Step, v, st.Stop.Smoothed, st.BestVal, st.BestStep, st.ZeroPooled, st.ZeroCell)
		// The resume checkpoint goes first and records the new best: if
		// the run stops before the best checkpoint is written, its weights
		// are the best ones and resuming writes them (reconcileBest); a
		// resumed run never believes in a best it cannot find on disk.
		if err := saveResume(); err != nil {
			return false, fmt.Errorf("save resume checkpoint: %w", err)
		}
		if o.afterResumeSave != nil {
			if err := o.afterResumeSave(); err != nil {
				return false, err
			}
		}
		if improved {
			ck := o.checkpoint(w, st, v)
			if err := ck.Save(o.Out); err != nil {
				return false, fmt.Errorf("save best checkpoint: %w", err)
			}
		}
		return stop, nil
	}

	for st.Step < o.Steps && frac() < 1 {
		var b *batch
		select {
		case <-ctx.Done():
		case b = <-ld.out:
		}
		if b == nil {
			break
		}
		if b.err != nil {
			return nil, fmt.Errorf("train: step %d: %w", st.Step, b.err)
		}
		if err := tg.SetInputs(b.inputs, b.rows, b.targets); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if a := distillWeight(st.Distill, st.DistillEnd, frac()); a > 0 {
			mixTargets(soft, b.teacher, b.targets, a, o.Config.Classes)
			if err := tg.SetTargetDist(soft); err != nil {
				return nil, fmt.Errorf("train: step %d: teacher targets: %w", st.Step, err)
			}
		}
		ld.free <- b
		loss, err := tg.Run()
		if err != nil {
			return nil, fmt.Errorf("train: step %d: %w", st.Step, err)
		}
		if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
			return nil, fmt.Errorf("train: step %d: loss is %v (learning rate %.3g too high?)", st.Step, loss, o.LR)
		}
		lr := sched.Rate(st.Step)
		if st.Budget > 0 {
			lr = sched.RateAt(frac())
		}
		st.Opt.Update(w, tg.Grad, lr)
		st.Step++
		emaN++
		trainEMA = 0.98*trainEMA + 0.02*float64(loss)
		smoothed := trainEMA / (1 - math.Pow(0.98, float64(emaN)))
		st.History = append(st.History, Point{Step: st.Step, TrainLoss: float64(loss), Val: math.NaN(), LR: lr,
			ElapsedSecs: elapsed0 + time.Since(start).Seconds()})

		if time.Since(lastLog) >= o.ProgressEvery || st.Step == o.Steps {
			dt := time.Since(lastLog).Seconds()
			sps := float64(st.Step-stepsAtLog) / dt
			eta := time.Duration(float64(o.Steps-st.Step) / sps * float64(time.Second)).Round(time.Second)
			if st.Budget > 0 {
				eta = min(eta, time.Duration((1-frac())*st.Budget*float64(time.Second)).Round(time.Second))
			}
			fmt.Fprintf(o.Log, "step %d/%d  lr %.3g  loss %.4f  val %.4f  %.2f steps/s  %.1f samples/s  ETA %s\n",
				st.Step, o.Steps, lr, smoothed, st.BestVal, sps, sps*float64(o.Batch), eta)
			lastLog, stepsAtLog = time.Now(), st.Step
		}
		if st.Step%o.ValEvery == 0 || st.Step == o.Steps || frac() >= 1 {
			stop, err := validate()
			if errors.Is(err, context.Canceled) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("train: step %d: %w", st.Step, err)
			}
			if stop {
				fmt.Fprintf(o.Log, "early stop at step %d: smoothed val NLL not improved for %d evaluations\n", st.Step, st.Stop.Patience)
				res.Stopped = true
				break
			}
		}
	}
	stopLoader()
	res.Interrupted = ctx.Err() != nil && st.Step < o.Steps && frac() < 1 && !res.Stopped
	if err := saveResume(); err != nil {
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
	res.Elapsed = time.Duration((elapsed0 + time.Since(start).Seconds()) * float64(time.Second))
	if len(st.History) > 0 && res.Elapsed > 0 {
		res.SamplesPerSec = float64(st.Step*o.Batch) / res.Elapsed.Seconds()
	}
	return res, nil
}

// distillWeight is the teacher's share of the targets at fraction f of
// the run: w at the start, falling linearly to 0 at fraction end.
func distillWeight(w, end, f float64) float64 {
	if w <= 0 || f >= end {
		return 0
	}
	return w * (1 - f/end)
}

// mixTargets writes to dst the target distributions a*teacher + (1-a)*onehot
// for a batch ([B][k] teacher probabilities, B true classes). The teacher's
// rows are renormalised (they may miss 1 by float32 rounding).
func mixTargets(dst, teacher []float32, targets []int, a float64, k int) {
	for i, t := range targets {
		row, tr := dst[i*k:(i+1)*k], teacher[i*k:(i+1)*k]
		var sum float64
		for _, v := range tr {
			sum += float64(v)
		}
		for j, v := range tr {
			row[j] = 0
			if sum > 0 {
				row[j] = float32(a * float64(v) / sum)
			}
		}
		row[t] += float32(1 - a)
		if !(sum > 0) {
			row[t] = 1
		}
	}
}

// checkpoint wraps the current weights with the run's metadata.
func (o *Options) checkpoint(w *model.Weights, st *state, valNLL float64) *model.Checkpoint {
	return &model.Checkpoint{
		Weights:    w,
		CellIDs:    o.cellIDs(),
		BinRateHz:  o.Rec.BinRateHz(),
		WindowBins: rgc.WindowBins,
		Horizon:    rgc.Horizon,
		Provenance: model.Provenance{
			Data: o.Data, Steps: st.Step, ValNLL: valNLL, ZeroInputNLL: st.ZeroPooled,
			TrainedAt: time.Now().UTC().Format(time.RFC3339),
			Notes: strings.TrimSpace(fmt.Sprintf("batch %d, peak lr %.3g, seed %d, %d of %d steps, val on %d windows, zero-input per-cell %.4f. %s",
				st.Batch, st.LR, st.Seed, st.Step, st.Steps, o.ValWindows, st.ZeroCell, o.Notes)),
		},
	}
}

// plotCurve writes the training and validation loss against the step.
func (o *Options) plotCurve(st *state) error {
	if len(st.History) == 0 {
		return nil
	}
	var sx, sy, vx, vy []float64
	ema, n := 0.0, 0
	for _, p := range st.History {
		n++
		ema = 0.98*ema + 0.02*p.TrainLoss
		sx = append(sx, float64(p.Step))
		sy = append(sy, ema/(1-math.Pow(0.98, float64(n))))
		if !math.IsNaN(p.Val) {
			vx, vy = append(vx, float64(p.Step)), append(vy, p.Val)
		}
	}
	zx := []float64{sx[0], sx[len(sx)-1]}
	ch := plot.Chart{
		Title:  fmt.Sprintf("%s training (batch %d, peak lr %.3g)", o.Config.Name(), st.Batch, st.LR),
		XLabel: "step", YLabel: "NLL (nats)",
		Series: []plot.Series{
			{Name: "train (smoothed)", X: sx, Y: sy},
			{Name: "validation", X: vx, Y: vy, Points: len(vx) < 3},
			{Name: "zero-input (pooled)", X: zx, Y: []float64{st.ZeroPooled, st.ZeroPooled}},
		},
	}
	return ch.SaveSVG(curvePath(o.Out))
}

func curvePath(out string) string {
	if i := strings.LastIndexByte(out, '.'); i > strings.LastIndexByte(out, '/') {
		out = out[:i]
	}
	return out + "-loss.svg"
}

// initHeadBias starts a model from (near) the zero-input model, so the
// first steps need not learn the very uneven marginal distribution: a cat
// head's bias holds the log class frequencies, a logmix head's a mixture
// fitted to them (logMixInit).
func initHeadBias(w *model.Weights, pooled []float64) {
	hb := w.Tensors["head.bias"]
	if w.Config.Head == model.HeadCat {
		for k := range hb {
			hb[k] = float32(math.Log(pooled[k]))
		}
		return
	}
	copy(hb, logMixInit(pooled, w.Config.Mixtures))
}

// logMixInit returns logmix head outputs (mixtures weight logits, means,
// log standard deviations) whose mixture roughly matches the class
// distribution p, so a logmix model starts where a cat model does (at the
// zero-input model) instead of spending its first steps finding the scale
// of the data. The component means are spread evenly in log time from half a
// bin to 5 horizons, each a little wider than the spacing; class k < h
// (time k+0.5) gives its probability to the component nearest in log time,
// and class h (no spike within the horizon) spreads its probability evenly
// over the components beyond the horizon.
func logMixInit(p []float64, mixtures int) []float32 {
	h := len(p) - 1
	lo, hi := math.Log(0.5), math.Log(5*float64(h))
	step := (hi - lo) / float64(max(mixtures-1, 1))
	mu := func(m int) float64 { return lo + step*float64(m) }
	weight := make([]float64, mixtures)
	var beyond []int
	for m := range weight {
		if mu(m) > math.Log(float64(h)) {
			beyond = append(beyond, m)
		}
	}
	if len(beyond) == 0 {
		beyond = []int{mixtures - 1}
	}
	for k := 0; k < h; k++ {
		m := int(math.Round((math.Log(float64(k)+0.5) - lo) / step))
		weight[min(max(m, 0), mixtures-1)] += p[k]
	}
	for _, m := range beyond {
		weight[m] += p[h] / float64(len(beyond))
	}
	out := make([]float32, 3*mixtures)
	logSigma := math.Log(1.5 * step)
	for m := 0; m < mixtures; m++ {
		out[m] = float32(math.Log(math.Max(weight[m], 1e-6)))
		out[mixtures+m] = float32(mu(m))
		out[2*mixtures+m] = float32(math.Min(math.Max(logSigma, model.MinLogSigma), model.MaxLogSigma))
	}
	return out
}
