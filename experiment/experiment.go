package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"rgcpred/evaluation"
	"slices"
	"strings"
	"sync"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rollout"
)

// Options configure Run.
type Options struct {
	// Dir is the experiment directory; it is created if missing.
	Dir string
	// Plan is what to train. In a directory that already holds an
	// experiment it must equal the manifest's plan but for the grid and
	// the recording's path (see Plan).
	Plan Plan
	// Eval configures the evaluation.
	Eval EvalSettings
	// Command is the command line, recorded in the manifest.
	Command []string
	// Out receives progress lines and the results table (nil: os.Stdout).
	// On a terminal the progress of a run is one line rewritten in place;
	// elsewhere it comes as plain lines.
	Out io.Writer
	// ProgressEvery is the interval between progress lines when Out is not
	// a terminal (0: 10 s); lines also come at every validation.
	ProgressEvery time.Duration

	// hook, when set, is called on the training goroutine at every step
	// ("step"), committed segment boundary ("boundary") and finished run
	// ("trained") with the run's name and step; tests interrupt runs there.
	hook func(event, run string, step int)
}

// Run runs the experiment in o.Dir: it trains every run of the grid that
// has not finished (continuing interrupted runs from their last segment
// boundary), evaluates every run and the baselines on the split (cached),
// and writes the results (results-SPLIT.json, figure-SPLIT.png and .svg)
// and prints the table to o.Out. When ctx ends first it returns an error
// wrapping ctx's; running it again continues.
func Run(ctx context.Context, o Options) (*Results, error) {
	x, unlock, err := open(o)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res, err := x.run(ctx)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted; run the same command again or `trainer experiment --resume %s` to continue: %w", x.dir, err)
	}
	return res, err
}

// exp is an experiment being run.
type exp struct {
	dir     string
	plan    Plan
	evs     EvalSettings
	split   rgc.Split
	metrics *rollout.Metrics
	policy  rollout.Policy
	rec     *rgc.Recording
	cells   []int
	ids     []int
	man     *Manifest
	grid    []*RunState // this invocation's runs, in training order

	hook  func(event, run string, step int)
	out   io.Writer
	tty   bool
	every time.Duration
	start time.Time

	mu sync.Mutex // guards the progress state below
	// cur is the run being trained: its grid index, latest step and
	// validation, where this session started it and when.
	cur struct {
		i, step, from int
		val, best     float64
		since         time.Time
	}
	doneSteps  int     // steps gained by runs finished or left in this session
	doneWall   float64 // the wall time they took, s
	evalsTotal int
	evalsDone  int
	evalSecs   float64 // wall time of the evaluations computed in this session
	evalsTimed int
	shown      time.Time // when a progress line was last shown
	dirty      bool      // a terminal status line is showing
}

// open validates o, locks the directory, loads the recording and creates
// or checks the manifest.
func open(o Options) (*exp, func(), error) {
	if o.Dir == "" {
		return nil, nil, errors.New("experiment: no directory")
	}
	x := &exp{dir: o.Dir, plan: o.Plan, evs: o.Eval, out: o.Out, every: o.ProgressEvery, start: time.Now(), hook: o.hook}
	x.cur.i = -1
	x.plan.Configs = slices.Clone(o.Plan.Configs)
	x.plan.Seeds = slices.Clone(o.Plan.Seeds)
	if x.out == nil {
		x.out = os.Stdout
	}
	if x.every <= 0 {
		x.every = 10 * time.Second
	}
	x.tty = evaluation.IsTerminal(x.out)
	split, err := x.evs.check()
	if err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	x.split = split
	if x.metrics, err = rollout.NewMetrics(x.evs.SigmaMs, rgc.BinMs); err != nil {
		return nil, nil, fmt.Errorf("experiment: sigma: %w", err)
	}
	if x.policy, err = rollout.ParsePolicy(x.evs.Policy); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	if err := os.MkdirAll(x.dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	unlock, err := lockDir(x.dir)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			unlock()
		}
	}()
	if x.rec, err = rgc.Load(x.plan.Data); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	if x.cells, err = SelectCells(x.rec, x.plan.Cells); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	if len(x.cells) == 0 {
		return nil, nil, fmt.Errorf("experiment: recording %s has no %s cells", x.plan.Data, x.plan.Cells)
	}
	for _, c := range x.cells {
		x.ids = append(x.ids, x.rec.Cells[c].ClusterID)
	}
	if err := x.plan.normalise(len(x.cells)); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	if err := x.checkBaselines(); err != nil {
		return nil, nil, err
	}
	if err := x.loadManifest(o.Command); err != nil {
		return nil, nil, err
	}
	for _, s := range x.plan.Seeds {
		for _, c := range x.plan.Configs {
			x.grid = append(x.grid, x.man.run(c, s))
		}
	}
	if err := x.save(); err != nil {
		return nil, nil, err
	}
	ok = true
	return x, unlock, nil
}

// checkBaselines checks, before any training, that the GLM knows every
// cell and that the extra comparisons name models of the experiment.
func (x *exp) checkBaselines() error {
	names := append([]string{"zero"}, x.plan.Configs...)
	if x.evs.GLM != "" {
		tr, err := glm.LoadTruth(x.evs.GLM)
		if err != nil {
			return fmt.Errorf("experiment: --glm: %w", err)
		}
		known := make([]int, len(tr.Cells))
		for i, c := range tr.Cells {
			known[i] = c.ClusterID
		}
		if missing := rollout.MissingCells(known, x.ids); len(missing) > 0 {
			return fmt.Errorf("experiment: GLM %s has no model of cells %v (give --glm none, or --cells quality)", x.evs.GLM, missing)
		}
		names = append(names, "glm")
	}
	models := make([]ModelReport, len(names))
	for i, n := range names {
		models[i] = ModelReport{Name: n, Kind: "config"}
	}
	if _, err := comparisons(nil, models, x.evs.Compare); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	return nil
}

// loadManifest reads the directory's manifest and checks that it planned
// the same training, or starts a new one.
func (x *exp) loadManifest(command []string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	id := recordingID(x.rec)
	has, err := HasManifest(x.dir)
	if err != nil {
		return err
	}
	if !has {
		x.man = &Manifest{Version: ManifestVersion, Command: command, LastCommand: command, Created: now,
			Plan: x.plan, Recording: id, CellIDs: x.ids, Eval: x.evs}
		return nil
	}
	m, err := LoadManifest(x.dir)
	if err != nil {
		return err
	}
	var diff []string
	if m.Recording != id {
		diff = append(diff, fmt.Sprintf("recording %+v (experiment) vs %+v (now, %s)", m.Recording, id, x.plan.Data))
	} else if !slices.Equal(m.CellIDs, x.ids) {
		diff = append(diff, fmt.Sprintf("cells %v (experiment) vs %v (now)", m.CellIDs, x.ids))
	}
	diff = append(diff, m.Plan.sameTraining(&x.plan)...)
	if len(diff) > 0 {
		return fmt.Errorf("experiment %s was planned differently: %s; give the same settings, or `trainer experiment --resume %s`",
			x.dir, strings.Join(diff, "; "), x.dir)
	}
	m.Plan, m.Eval, m.LastCommand = x.plan, x.evs, command
	x.man = m
	return nil
}

// save writes the manifest.
func (x *exp) save() error {
	if err := x.man.save(x.dir); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	return nil
}

// runDir is the directory of run r.
func (x *exp) runDir(r *RunState) string { return filepath.Join(x.dir, "runs", r.Name) }

// run trains, evaluates and reports.
func (x *exp) run(ctx context.Context) (*Results, error) {
	x.logf("experiment %s: %s, %d %s cells; %d configurations x %d seeds = %d runs of %s; evaluation on the %s split",
		x.dir, x.rec.Name, len(x.cells), x.plan.Cells, len(x.plan.Configs), len(x.plan.Seeds), len(x.grid),
		x.plan.Budget.String(x.plan.Batch), x.split)
	x.evalsTotal = len(x.grid) + len(x.baselines())
	evals := make(map[string]*evalRecord, len(x.grid))
	for i, r := range x.grid {
		if r.Status != StatusTrained {
			if err := x.trainRun(ctx, i, r); err != nil {
				return nil, err
			}
		}
		ev, err := x.evalRun(ctx, i, r)
		if err != nil {
			return nil, err
		}
		evals[r.Name] = ev
	}
	var base []*evalRecord
	for _, b := range x.baselines() {
		ev, err := x.evalBaseline(ctx, b)
		if err != nil {
			return nil, err
		}
		base = append(base, ev)
	}
	res, err := x.results(evals, base)
	if err != nil {
		return nil, err
	}
	if err := x.write(res); err != nil {
		return nil, err
	}
	return res, nil
}

// logf prints a line of its own, after ending a terminal status line.
func (x *exp) logf(format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.endStatus()
	fmt.Fprintf(x.out, format+"\n", args...)
}

// endStatus ends a terminal status line, if one is showing.
func (x *exp) endStatus() {
	if x.dirty {
		fmt.Fprintln(x.out)
		x.dirty = false
	}
}

// runStarted notes that run i starts (or continues) training.
func (x *exp) runStarted(i int, r *RunState) {
	x.mu.Lock()
	x.cur.i, x.cur.step, x.cur.from, x.cur.since = i, r.BoundaryStep, r.BoundaryStep, time.Now()
	x.cur.val, x.cur.best = 0, 0
	x.mu.Unlock()
	what := "training"
	if r.BoundaryStep > 0 {
		what = fmt.Sprintf("continuing from step %d", r.BoundaryStep)
	}
	x.logf("run %d/%d %s seed %d: %s", i+1, len(x.grid), r.Config, r.Seed, what)
}

// runFinished notes that run i has finished training.
func (x *exp) runFinished(i int, r *RunState) {
	x.mu.Lock()
	x.doneSteps += r.Steps - x.cur.from
	x.doneWall += time.Since(x.cur.since).Seconds()
	x.cur.i = -1
	x.mu.Unlock()
	how := ""
	if r.Stopped {
		how = ", stopped early"
	}
	x.logf("run %d/%d %s seed %d: trained, %d steps%s, best val NLL %.4f at step %d, %s training (%s wall)",
		i+1, len(x.grid), r.Config, r.Seed, r.Steps, how, r.BestVal, r.BestStep,
		seconds(r.TrainSeconds), seconds(r.WallSeconds))
	x.event("trained", r, r.Steps)
}

// stepProgress records that run i has taken step; wall is the run's wall
// time so far.
func (x *exp) stepProgress(i int, r *RunState, step int, wall float64) {
	x.mu.Lock()
	x.cur.step = step
	if x.tty && time.Since(x.shown) >= 200*time.Millisecond || !x.tty && time.Since(x.shown) >= x.every {
		x.showStatus(i, r, wall)
	}
	x.mu.Unlock()
	x.event("step", r, step)
}

// event calls the test hook, if any.
func (x *exp) event(name string, r *RunState, step int) {
	if x.hook != nil {
		x.hook(name, r.Name, step)
	}
}

// valProgress records a validation of run i.
func (x *exp) valProgress(i int, r *RunState, step int, val, wall float64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur.step, x.cur.val = step, val
	if x.cur.best == 0 || val < x.cur.best {
		x.cur.best = val
	}
	x.showStatus(i, r, wall)
}

// showStatus shows run i's progress: a line rewritten in place on a
// terminal, else a plain line.
func (x *exp) showStatus(i int, r *RunState, wall float64) {
	x.shown = time.Now()
	steps := x.plan.Budget.steps(x.plan.Batch)
	var b strings.Builder
	fmt.Fprintf(&b, "run %d/%d %s seed %d: step %d", i+1, len(x.grid), r.Config, r.Seed, x.cur.step)
	if steps != noStepCap {
		fmt.Fprintf(&b, "/%d", steps)
	}
	if x.cur.val > 0 {
		fmt.Fprintf(&b, ", val NLL %.4f (best %.4f)", x.cur.val, x.cur.best)
	}
	fmt.Fprintf(&b, ", run %s, elapsed %s", seconds(wall), seconds(time.Since(x.start).Seconds()))
	if eta, ok := x.eta(); ok {
		fmt.Fprintf(&b, ", ETA %s", seconds(eta))
	}
	if x.tty {
		fmt.Fprintf(x.out, "\r%s\033[K", b.String())
		x.dirty = true
	} else {
		fmt.Fprintln(x.out, b.String())
	}
}

// eta estimates the seconds left in the whole experiment: the steps left
// at the step rate of this session (restarts and validations included),
// or the time budgets left, plus the evaluations left at their mean time.
func (x *exp) eta() (float64, bool) {
	steps := x.plan.Budget.steps(x.plan.Batch)
	var left float64
	if x.plan.Budget.Kind() == "time" {
		budget := time.Duration(x.plan.Budget.Time).Seconds()
		for j, r := range x.grid {
			switch {
			case r.Status == StatusTrained:
			case j == x.cur.i:
				left += max(budget-time.Since(x.cur.since).Seconds(), 0)
			default:
				left += budget
			}
		}
	} else {
		gained, wall := x.doneSteps, x.doneWall
		if x.cur.i >= 0 {
			gained += x.cur.step - x.cur.from
			wall += time.Since(x.cur.since).Seconds()
		}
		if gained <= 0 {
			return 0, false
		}
		var stepsLeft int
		for j, r := range x.grid {
			switch {
			case r.Status == StatusTrained:
			case j == x.cur.i:
				stepsLeft += steps - x.cur.step
			default:
				stepsLeft += steps - r.BoundaryStep
			}
		}
		left = float64(stepsLeft) * wall / float64(gained)
	}
	if x.evalsTimed > 0 {
		left += float64(x.evalsTotal-x.evalsDone) * x.evalSecs / float64(x.evalsTimed)
	}
	return left, true
}

// seconds formats a number of seconds as a duration rounded to the second.
func seconds(s float64) string {
	return (time.Duration(s*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
}
