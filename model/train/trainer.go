package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"rgcpred/base/plot"
	"rgcpred/model"
	"rgcpred/model/engine"
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
	// Replicas is the number of data-parallel replicas the threads are
	// shared by, each taking an equal share of the batch (Replicas: 0 is
	// auto, one per thread when they divide the batch).
	Replicas int
	// Precision is the arithmetic of the training GEMMs (empty: fp32). A
	// resumed run keeps the one it started with.
	Precision Precision
	// EMA, if not 0, is the decay of an exponential moving average of the
	// weights (EMA; within (0, 1), e.g. 0.999): validation, early stopping
	// and the best checkpoint use the average, and the best checkpoint holds
	// it; training continues from the raw weights. A resumed run keeps the
	// decay it started with: 0 takes it, another value is an error.
	EMA float64
	// Out is the path of the best checkpoint; the resume checkpoint is
	// Out+".resume" and the loss curve Out without extension + "-loss.svg"
	// and "-loss.png".
	Out string
	// Resume, if set, is a resume checkpoint to continue from.
	Resume string
	// Init, if set (and Resume is not), is a checkpoint whose weights start
	// this run instead of a fresh initialisation: a warm restart with a new
	// optimiser and schedule. Its config must match the run's; its cells may
	// differ (new cells' embeddings start at the mean of its rows).
	Init string
	// Teacher, with Distill > 0, is a predictor whose class distributions
	// join the targets (knowledge distillation, Hinton et al. 2015). Cat
	// head only.
	//   - A training window's target is Distill' times the teacher's
	//     distribution plus (1 - Distill') times the one-hot true class.
	//   - Distill' falls linearly from Distill at the start to 0 at the
	//     fraction DistillEnd of the run (default 0.6), so the rest of the
	//     run (and its annealing) fits the true classes alone and can go
	//     beyond the teacher.
	//   - Validation always scores the true classes.
	//   - The teacher sees the batch's windows with recording bins as ends
	//     (rgc.Batch from Recording.FillBatch), so a fitted GLM
	//     (rgc/glm.Predictor) trained on the same training split serves.
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
	// ValEvery and ValWindows are the validation plan: a resumed run keeps
	// them, since its best checkpoint is chosen by comparing validation
	// NLLs on one fixed set. 0 in states written before they were kept.
	ValEvery, ValWindows int
	// Precision is the run's arithmetic, resolved: fp32 or bf16 (empty in
	// states written before it was kept: those runs were fp32).
	Precision Precision
	// EMA is the average of the weights (Options.EMA); nil when the run
	// keeps none.
	EMA *EMA
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
	// Validation is the time this session spent scoring the validation
	// windows and saving checkpoints, and StepSamplesPerSec its training
	// windows per second of the rest: the steps' own speed.
	Validation        time.Duration
	StepSamplesPerSec float64
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
		if !(o.DistillEnd > 0) || math.IsInf(o.DistillEnd, 0) {
			return fmt.Errorf("distillation end %v must be a positive fraction of the run", o.DistillEnd)
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
	if err := CheckEMADecay(o.EMA); err != nil {
		return err
	}
	if _, err := ParsePrecision(string(o.Precision)); err != nil && o.Precision != "" {
		return err
	}
	o.Precision = o.Precision.Resolve()
	r, err := Replicas(o.Replicas, o.Threads, o.Batch)
	if err != nil {
		return err
	}
	o.Replicas = r
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

// evaluator computes the validation NLL of the weights w as they are at
// each call, on the inference engine (engine.NewFromWeights packs them
// per call): the engine's float32 forward pass equals the graph's within
// its parity tests and runs about twice as fast, and validation stalls
// training while it runs.
type evaluator struct {
	w       *model.Weights
	val     *valSet
	batch   int
	threads int
	ids     []int // embedding row i under "cluster id" i
}

func newEvaluator(w *model.Weights, val *valSet, batch, threads int) *evaluator {
	ids := make([]int, w.Config.NumCells)
	for i := range ids {
		ids[i] = i
	}
	return &evaluator{w: w, val: val, batch: batch, threads: threads, ids: ids}
}

// nll returns the mean validation NLL.
func (e *evaluator) nll(ctx context.Context) (float64, error) {
	eng, err := engine.NewFromWeights(e.w, e.ids, e.batch, e.threads)
	if err != nil {
		return 0, fmt.Errorf("validation engine: %w", err)
	}
	defer eng.Close()
	var sum float64
	if err := scoreValSet(ctx, eng, e.val, e.ids, e.batch, func(_ int, v float64) { sum += v }); err != nil {
		return 0, fmt.Errorf("validation: %w", err)
	}
	return sum / float64(len(e.val.targets)), nil
}

// Run trains until the planned steps are done, early stopping triggers or
// ctx is cancelled (then it saves the resume checkpoint and returns with
// Interrupted set and a nil error). The steps: check the options, find
// the starting weights and state (resume, warm start or fresh), set up the
// session (graphs, validation set, loader), loop over optimiser steps with
// validation, then save and summarise.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	w, st, err := o.start()
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	s, err := newSession(ctx, &o, w, st)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer s.close()
	if err := s.loop(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return s.finish()
}

// start returns the weights and training state a run begins from: those
// of the resume checkpoint (which also sets the run's plan and cells in
// o), the weights of the Init checkpoint with a fresh state, or freshly
// initialised weights.
func (o *Options) start() (*model.Weights, *state, error) {
	st := &state{Steps: o.Steps, Batch: o.Batch, LR: o.LR, Seed: o.Seed, Opt: NewAdamW(), Stop: NewEarlyStop(), BestVal: math.Inf(1),
		Budget: o.TimeBudget.Seconds(), Distill: o.Distill, DistillEnd: o.DistillEnd,
		ValEvery: o.ValEvery, ValWindows: o.ValWindows, Precision: o.Precision}
	switch {
	case o.Resume != "":
		w, st, err := o.resume()
		if err != nil {
			return nil, nil, fmt.Errorf("resume: %w", err)
		}
		return w, st, nil
	case o.Init != "":
		w, err := o.warmStart()
		if err != nil {
			return nil, nil, fmt.Errorf("init: %w", err)
		}
		return w, st, nil
	default:
		return model.InitWeights(o.Config, rand.New(rand.NewPCG(o.Seed, 0x5eed))), st, nil
	}
}

// resume loads the resume checkpoint o.Resume and takes the run's plan,
// cells and configuration from it.
func (o *Options) resume() (*model.Weights, *state, error) {
	ck, err := model.LoadCheckpoint(o.Resume)
	if err != nil {
		return nil, nil, err
	}
	if len(ck.TrainState) == 0 {
		return nil, nil, fmt.Errorf("%s holds no training state", o.Resume)
	}
	if err := ck.CheckInput(o.Rec.StimMode); err != nil {
		return nil, nil, fmt.Errorf("resume %s: %w", o.Resume, err)
	}
	st, err := decodeState(ck.TrainState, ck.Weights.Config, ck.Provenance.Steps)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Resume, err)
	}
	cells, err := o.Rec.CellIndices(ck.CellIDs)
	if err != nil {
		return nil, nil, err
	}
	o.Cells, o.Config = cells, ck.Weights.Config
	o.Steps, o.Batch, o.LR, o.Seed = st.Steps, st.Batch, st.LR, st.Seed
	o.TimeBudget = time.Duration(st.Budget * float64(time.Second))
	o.Distill, o.DistillEnd = st.Distill, st.DistillEnd
	kept := st.Precision.Resolve()
	if kept != o.Precision {
		fmt.Fprintf(o.Log, "%s trains in %s: the resumed run keeps it (not %s)\n", o.Resume, kept, o.Precision)
	}
	o.Precision, st.Precision = kept, kept
	switch {
	case st.EMA == nil && o.EMA != 0:
		return nil, nil, fmt.Errorf("%s was trained without a weight average: its best checkpoint and early stopping "+
			"followed the raw weights; leave --ema out, or average in a new run (--init)", o.Resume)
	case st.EMA != nil && o.EMA != 0 && o.EMA != st.EMA.Decay:
		return nil, nil, fmt.Errorf("%s averages the weights with decay %v, not %v: a resumed run keeps its decay (leave --ema out)",
			o.Resume, st.EMA.Decay, o.EMA)
	case st.EMA != nil:
		o.EMA = st.EMA.Decay
	}
	switch {
	case st.ValWindows > 0:
		o.ValEvery, o.ValWindows = st.ValEvery, st.ValWindows
	default:
		fmt.Fprintf(o.Log, "%s does not record its validation plan: validating every %d steps on %d windows, as given; "+
			"its best so far was measured on the windows it was started with\n", o.Resume, o.ValEvery, o.ValWindows)
		st.ValEvery, st.ValWindows = o.ValEvery, o.ValWindows
	}
	if o.Distill > 0 && o.Teacher == nil {
		return nil, nil, fmt.Errorf("%s was distilling from a teacher: give the teacher again", o.Resume)
	}
	if o.Distill > 0 && o.Config.Head != model.HeadCat {
		return nil, nil, fmt.Errorf("%s distils into a %s head; distillation needs the cat head", o.Resume, o.Config.Head)
	}
	if err := o.reconcileBest(st, ck); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(o.Log, "resuming %s at step %d/%d (best val %.4f at step %d)\n", o.Resume, st.Step, st.Steps, st.BestVal, st.BestStep)
	return ck.Weights, st, nil
}

// warmStart loads the weights of checkpoint o.Init, which must hold the
// run's configuration; its cells may differ (Checkpoint.WithCells: a model
// moves to more cells, or fewer). Its stimulus mode may differ from the
// run's: fine-tuning on the other mode is how a model moves to it (the new
// checkpoints record the run's mode).
func (o *Options) warmStart() (*model.Weights, error) {
	ck, err := model.LoadCheckpoint(o.Init)
	if err != nil {
		return nil, err
	}
	same := ck.Weights.Config
	same.NumCells = o.Config.NumCells
	if same != o.Config {
		return nil, fmt.Errorf("%s holds %s, not %s", o.Init, ck.Weights.Config.Name(), o.Config.Name())
	}
	fmt.Fprintf(o.Log, "starting from the weights of %s (trained on %s bins; this run's are %s)\n", o.Init, ck.StimMode, o.Rec.StimMode)
	ids := o.cellIDs()
	if slices.Equal(ids, ck.CellIDs) {
		return ck.Weights, nil
	}
	w, added, err := ck.WithCells(ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Init, err)
	}
	fmt.Fprintf(o.Log, "%s holds %d cells, this run trains %d: %d new, their embeddings start at the mean of its rows\n", o.Init, len(ck.CellIDs), len(ids), added)
	return w, nil
}

// distillWeight is the teacher's share of the targets at fraction f of
// the run: w at the start, falling linearly to 0 at fraction end. An end
// past the run's (above 1) leaves w(1 - 1/end) at the end: a large one
// keeps the share nearly constant, as ensemble distillation wants.
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
		StimMode:   o.Rec.StimMode,
		Provenance: model.Provenance{
			Data: o.Data, Steps: st.Step, ValNLL: valNLL, ZeroInputNLL: st.ZeroPooled,
			Precision: string(o.Precision), PrecisionPath: o.Precision.Path(), Replicas: o.Replicas, EMA: o.EMA,
			TrainedAt: time.Now().UTC().Format(time.RFC3339),
			Notes: strings.TrimSpace(fmt.Sprintf("batch %d, peak lr %.3g, seed %d, %d of %d steps, val on %d windows, zero-input per-cell %.4f. %s",
				st.Batch, st.LR, st.Seed, st.Step, st.Steps, o.ValWindows, st.ZeroCell, o.Notes)),
		},
	}
}

// plotCurve writes the training and validation loss against the step, as
// SVG and PNG (curvePath).
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
	_, err := plot.SaveBoth(&ch, curvePath(o.Out))
	return err
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
	hb := w.Get(model.LayerHead.Bias())
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
