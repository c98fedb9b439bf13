package experiment

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// flight is the progress of a run in training: its latest step and
// validation, where this invocation started it and when, and when its
// last plain progress line was shown. It is guarded by exp.mu.
type flight struct {
	i, step, from int
	val, best     float64
	wall          float64 // the run's wall time at its latest progress
	since, shown  time.Time
}

// logf prints a line of its own, after ending a terminal status line.
func (x *exp) logf(format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.endStatus()
	fmt.Fprintf(x.out, format+"\n", args...)
}

// endStatus ends a terminal status line, if one is showing. x.mu is held.
func (x *exp) endStatus() {
	if x.dirty {
		fmt.Fprintln(x.out)
		x.dirty = false
	}
}

// runStarted notes that run i starts (or continues) training.
func (x *exp) runStarted(i int, r *RunState) {
	x.mu.Lock()
	now := time.Now()
	if x.trainStart.IsZero() {
		x.trainStart = now
	}
	x.flying[i] = &flight{i: i, step: r.BoundaryStep, from: r.BoundaryStep, since: now}
	x.mu.Unlock()
	what := "training"
	if r.BoundaryStep > 0 {
		what = fmt.Sprintf("continuing from step %d", r.BoundaryStep)
	}
	x.logf("run %d/%d %s seed %d: %s", i+1, len(x.grid), r.Config, r.Seed, what)
}

// runLeft notes that run i stops training in this invocation, finished
// (steps is its final step) or interrupted (steps < 0: at its latest
// progress). A run not in training is ignored.
func (x *exp) runLeft(i, steps int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	f := x.flying[i]
	if f == nil {
		return
	}
	if steps < 0 {
		steps = f.step
	}
	x.doneSteps += steps - f.from
	delete(x.flying, i)
}

// runFinished notes that run i has finished training.
func (x *exp) runFinished(i int, r *RunState) {
	x.runLeft(i, r.Steps)
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
	if f := x.flying[i]; f != nil {
		f.step, f.wall = step, wall
		if x.tty && time.Since(x.shown) >= 200*time.Millisecond || !x.tty && time.Since(f.shown) >= x.every {
			x.showStatus(f, r)
		}
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
	f := x.flying[i]
	if f == nil {
		return
	}
	f.step, f.val, f.wall = step, val, wall
	if f.best == 0 || val < f.best {
		f.best = val
	}
	x.showStatus(f, r)
}

// showStatus shows the progress after an update of run f (r its state).
// On a terminal it rewrites the status line in place: run f's line when it
// is the only run in training, else a compact list of every run in
// training. Elsewhere it prints run f's line. x.mu is held.
func (x *exp) showStatus(f *flight, r *RunState) {
	now := time.Now()
	x.shown, f.shown = now, now
	var b strings.Builder
	if !x.tty || len(x.flying) == 1 {
		steps := x.plan.Budget.steps(x.plan.Batch)
		fmt.Fprintf(&b, "run %d/%d %s seed %d: step %d", f.i+1, len(x.grid), r.Config, r.Seed, f.step)
		if steps != noStepCap {
			fmt.Fprintf(&b, "/%d", steps)
		}
		if f.val > 0 {
			fmt.Fprintf(&b, ", val NLL %.4f (best %.4f)", f.val, f.best)
		}
		fmt.Fprintf(&b, ", run %s", seconds(f.wall))
	} else {
		b.WriteString(x.flightsLine())
	}
	fmt.Fprintf(&b, ", elapsed %s", seconds(time.Since(x.start).Seconds()))
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

// flightsLine lists the runs in training in grid order, compactly:
// "run 7/12 gpt-b-cat-cpu s2 700/2000 | run 8/12 ...". x.mu is held.
func (x *exp) flightsLine() string {
	steps := x.plan.Budget.steps(x.plan.Batch)
	idx := make([]int, 0, len(x.flying))
	for i := range x.flying {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var b strings.Builder
	for k, i := range idx {
		if k > 0 {
			b.WriteString(" | ")
		}
		r := x.grid[i]
		fmt.Fprintf(&b, "run %d/%d %s s%d %d", i+1, len(x.grid), r.Config, r.Seed, x.flying[i].step)
		if steps != noStepCap {
			fmt.Fprintf(&b, "/%d", steps)
		}
	}
	return b.String()
}

// eta estimates the seconds left in the whole experiment, plus the
// evaluations left at their mean time. With a step budget it is the steps
// left over the aggregate step rate of this invocation's training (every
// run in training together, restarts and validations included); with a
// time budget, the training time left shared among the runs that train at
// once. x.mu is held.
func (x *exp) eta() (float64, bool) {
	steps := x.plan.Budget.steps(x.plan.Batch)
	var left float64
	if x.plan.Budget.Kind() == "time" {
		budget := time.Duration(x.plan.Budget.Time).Seconds()
		untrained := 0
		for j, r := range x.grid {
			if r.Status == StatusTrained {
				continue
			}
			untrained++
			if f := x.flying[j]; f != nil {
				left += max(budget-time.Since(f.since).Seconds(), 0)
			} else {
				left += budget
			}
		}
		if n := min(x.jobs, untrained); n > 1 {
			left /= float64(n)
		}
	} else {
		gained := x.doneSteps
		for _, f := range x.flying {
			gained += f.step - f.from
		}
		if gained <= 0 || x.trainStart.IsZero() {
			return 0, false
		}
		var stepsLeft int
		for j, r := range x.grid {
			switch f := x.flying[j]; {
			case r.Status == StatusTrained:
			case f != nil:
				stepsLeft += steps - f.step
			default:
				stepsLeft += steps - r.BoundaryStep
			}
		}
		left = float64(stepsLeft) * time.Since(x.trainStart).Seconds() / float64(gained)
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
