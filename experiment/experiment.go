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
	// ProgressEvery is the interval between a run's progress lines when Out
	// is not a terminal (0: 10 s); lines also come at every validation.
	ProgressEvery time.Duration
	// Jobs is the number of runs that train at once (0 or 1: one at a
	// time), each with Plan.Threads compute goroutines. It is a scheduling
	// choice, not part of the plan: every run is deterministic given its
	// seed, the plan and Plan.Threads, so the results do not depend on it.
	// Jobs x Plan.Threads should not exceed the machine's cores.
	Jobs int

	// hook, when set, is called on a run's training goroutine at every
	// step ("step"), committed segment boundary ("boundary") and finished
	// run ("trained") with the run's name and step; tests interrupt runs
	// there. With Jobs > 1 it is called from several goroutines at once.
	hook func(event, run string, step int)
}

// Run runs the experiment in o.Dir: it trains every run of the grid that
// has not finished, up to o.Jobs at once (continuing interrupted runs from
// their last segment boundary), then evaluates every run and the baselines
// on the split (cached), writes the results (results-SPLIT.json,
// figure-SPLIT.png and .svg) and prints the table to o.Out. When ctx ends
// first it returns an error wrapping ctx's; running it again continues.
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
	jobs  int // runs that train at once, at least 1

	// mu guards the manifest (man and its runs: a run's state is written
	// only by the goroutine that trains or evaluates it, under mu, and read
	// by others under mu), its writes, the output and the progress state
	// below.
	mu         sync.Mutex
	flying     map[int]*flight // the runs in training, by grid index
	trainStart time.Time       // when this invocation started training
	doneSteps  int             // steps gained by runs finished or left in this invocation
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
	x := &exp{dir: o.Dir, plan: o.Plan, evs: o.Eval, out: o.Out, every: o.ProgressEvery, start: time.Now(), hook: o.hook,
		jobs: max(o.Jobs, 1), flying: map[int]*flight{}}
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
	if x.rec, err = rgc.LoadMode(x.plan.Data, x.plan.Stim); err != nil {
		return nil, nil, fmt.Errorf("experiment: %w", err)
	}
	if x.cells, err = x.rec.SelectCells(x.plan.Cells); err != nil {
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
		if missing := rollout.MissingCells(tr.ClusterIDs(), x.ids); len(missing) > 0 {
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
		// Runs without a manifest: it was lost, and a fresh start would
		// train over them.
		if ents, err := os.ReadDir(filepath.Join(x.dir, "runs")); err == nil && len(ents) > 0 {
			return fmt.Errorf("experiment %s holds %d runs but no %s: restore it, or start in a new directory",
				x.dir, len(ents), filepath.Join(x.dir, ManifestFile))
		}
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
func (x *exp) save() error { return x.commit(nil) }

// commit applies change (if any) to the manifest's state and writes the
// manifest, under x.mu: concurrent runs change their own RunState through
// it, and the writes are serialised.
func (x *exp) commit(change func()) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if change != nil {
		change()
	}
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
	if err := x.trainAll(ctx); err != nil {
		return nil, err
	}
	evals := make(map[string]*evalRecord, len(x.grid))
	for i, r := range x.grid {
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

// trainAll trains the runs of the grid that have not finished, up to
// x.jobs at once, taking them in grid order. When ctx ends, every run in
// training stops at its own safe point (as trainRun does) and no other
// starts; when a run fails, the others are stopped and its error returned.
func (x *exp) trainAll(ctx context.Context) error {
	var todo []int
	for i, r := range x.grid {
		if r.Status != StatusTrained {
			todo = append(todo, i)
		}
	}
	jobs := min(x.jobs, len(todo))
	inner, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	next := make(chan int)
	errs := make([]error, len(x.grid))
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for i := range next {
				if inner.Err() != nil {
					continue
				}
				if err := x.trainRun(inner, i, x.grid[i]); err != nil {
					errs[i] = err
					stop(err)
				}
			}
		})
	}
feed:
	for _, i := range todo {
		select {
		case next <- i:
		case <-inner.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		// Interrupted: the first run's error, as the runs left them.
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return ctx.Err()
	}
	return context.Cause(inner) // nil, or the first failing run's error
}
