package experiment

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"rgcpred/evaluation"
	"rgcpred/model"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// Duration is a time.Duration written in JSON as its string form ("90m0s").
type Duration time.Duration

// MarshalText writes d as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a time.ParseDuration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Budget is the matched training budget of every run: a number of
// optimiser steps (the default, and the only deterministic one together
// with Samples), a number of training windows, or wall-clock training time.
type Budget struct {
	// Steps is the number of optimiser steps per run; with Time it caps
	// the steps (0: no cap).
	Steps int `json:"steps,omitempty"`
	// Samples is the number of training windows per run: ceil(Samples /
	// Batch) steps.
	Samples int64 `json:"samples,omitempty"`
	// Time is the training time per run (train.Options.TimeBudget): the
	// schedule follows the time used. Runs are then not reproducible.
	Time Duration `json:"time,omitempty"`
}

// Kind names the budget: "steps", "samples" or "time".
func (b Budget) Kind() string {
	switch {
	case b.Time > 0:
		return "time"
	case b.Samples > 0:
		return "samples"
	}
	return "steps"
}

// String describes the budget per run for a batch size.
func (b Budget) String(batch int) string {
	switch b.Kind() {
	case "time":
		s := fmt.Sprintf("%s of training", time.Duration(b.Time))
		if b.Steps > 0 {
			s += fmt.Sprintf(" (at most %d steps)", b.Steps)
		}
		return s
	case "samples":
		return fmt.Sprintf("%d samples (%d steps x batch %d)", b.Samples, b.steps(batch), batch)
	}
	return fmt.Sprintf("%d steps x batch %d (%d samples)", b.Steps, batch, int64(b.Steps)*int64(batch))
}

// noStepCap is the step count of a time budget without a step cap.
const noStepCap = math.MaxInt32

// steps is the planned number of optimiser steps (train.Options.Steps).
func (b Budget) steps(batch int) int {
	switch b.Kind() {
	case "time":
		if b.Steps > 0 {
			return b.Steps
		}
		return noStepCap
	case "samples":
		return int((b.Samples + int64(batch) - 1) / int64(batch))
	}
	return b.Steps
}

func (b Budget) check() error {
	switch {
	case b.Steps < 0 || b.Samples < 0 || b.Time < 0:
		return fmt.Errorf("budget %+v: negative", b)
	case b.Samples > 0 && (b.Steps > 0 || b.Time > 0):
		return errors.New("budget: give one of steps, samples and time (a time budget takes a step cap)")
	case b.Steps == 0 && b.Samples == 0 && b.Time == 0:
		return errors.New("budget: give steps, samples or time per run")
	}
	return nil
}

// Plan is what an experiment trains: the recording and cells, the grid of
// configurations x seeds, the budget and the training settings shared by
// every run. Everything but the grid must stay the same for the life of an
// experiment directory, since it decides the runs' results; the grid may
// grow (new runs are added, finished ones kept).
type Plan struct {
	// Data is the recording directory.
	Data string `json:"data"`
	// Cells selects the cells: "quality" or "all".
	Cells string `json:"cells"`
	// Stim is the stimulus binning of training and evaluation (manifests
	// written without it read as causal).
	Stim rgc.StimMode `json:"stim"`
	// Configs are the model configurations (model.ParseConfigName names,
	// e.g. gpt-a-cat-cpu) and Seeds the training seeds of each.
	Configs []string `json:"configs"`
	Seeds   []uint64 `json:"seeds"`
	// Budget is the training budget of every run.
	Budget Budget `json:"budget"`
	// Batch, LR, ValEvery and ValWindows are train.Options' settings.
	Batch      int     `json:"batch"`
	LR         float64 `json:"lr"`
	ValEvery   int     `json:"val_every"`
	ValWindows int     `json:"val_windows"`
	// Segment is the number of steps between saved segment boundaries
	// (a multiple of ValEvery; 0: none, a killed run starts over).
	Segment int `json:"segment"`
	// Threads is the number of compute goroutines of training and
	// evaluation. Results depend on it (the graph splits its sums by
	// thread), so it is part of the plan.
	Threads int `json:"threads"`
}

// DefaultSegmentValidations is the default segment length in validations.
const DefaultSegmentValidations = 5

// normalise checks p, fills in defaults and rewrites the configuration
// names in canonical form (model.Config.Name) for numCells cells.
func (p *Plan) normalise(numCells int) error {
	if p.Data == "" {
		return errors.New("plan: no recording (--data)")
	}
	if p.Cells != "quality" && p.Cells != "all" {
		return fmt.Errorf("plan: cells %q: want quality or all", p.Cells)
	}
	if len(p.Configs) == 0 {
		return errors.New("plan: no configurations")
	}
	if len(p.Seeds) == 0 {
		return errors.New("plan: no seeds")
	}
	if err := p.Budget.check(); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	switch {
	case p.Batch < 1:
		return fmt.Errorf("plan: batch %d: want at least 1", p.Batch)
	case !(p.LR > 0):
		return fmt.Errorf("plan: learning rate %v: want > 0", p.LR)
	case p.ValEvery < 1:
		return fmt.Errorf("plan: val-every %d: want at least 1", p.ValEvery)
	case p.ValWindows < 1:
		return fmt.Errorf("plan: val-windows %d: want at least 1", p.ValWindows)
	case p.Segment < 0:
		return fmt.Errorf("plan: segment %d: want 0 (none) or more", p.Segment)
	case p.Threads < 1:
		return fmt.Errorf("plan: threads %d: want at least 1", p.Threads)
	}
	if r := p.Segment % p.ValEvery; r != 0 {
		p.Segment += p.ValEvery - r
	}
	seen := map[string]bool{}
	for i, name := range p.Configs {
		c, err := model.ParseConfigName(name, max(numCells, 1))
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		if seen[c.Name()] {
			return fmt.Errorf("plan: configuration %s given twice", c.Name())
		}
		seen[c.Name()] = true
		p.Configs[i] = c.Name()
	}
	seeds := map[uint64]bool{}
	for _, s := range p.Seeds {
		if seeds[s] {
			return fmt.Errorf("plan: seed %d given twice", s)
		}
		seeds[s] = true
	}
	return nil
}

// sameTraining reports the settings in which q differs from p, ignoring
// the grid (Configs, Seeds) and the recording's path (the recording itself
// is compared by its fingerprint).
func (p *Plan) sameTraining(q *Plan) []string {
	var diff []string
	add := func(name string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			diff = append(diff, fmt.Sprintf("%s %v (experiment) vs %v (now)", name, a, b))
		}
	}
	add("cells", p.Cells, q.Cells)
	add("budget", p.Budget.String(p.Batch), q.Budget.String(q.Batch))
	add("batch", p.Batch, q.Batch)
	add("lr", p.LR, q.LR)
	add("val-every", p.ValEvery, q.ValEvery)
	add("val-windows", p.ValWindows, q.ValWindows)
	add("segment", p.Segment, q.Segment)
	add("threads", p.Threads, q.Threads)
	return diff
}

// RecordingID identifies a recording independently of where it lies.
type RecordingID struct {
	// Name is the recording's name, Bins its length, Cells its number of
	// cells and Spikes their total spike count.
	Name   string `json:"name"`
	Bins   int    `json:"bins"`
	Cells  int    `json:"cells"`
	Spikes int    `json:"spikes"`
}

func recordingID(rec *rgc.Recording) RecordingID {
	id := RecordingID{Name: rec.Name, Bins: rec.Bins, Cells: len(rec.Cells)}
	for _, c := range rec.Cells {
		id.Spikes += len(c.SpikeBins)
	}
	return id
}

// EvalSettings configure the evaluation of an experiment's runs and
// baselines. They may change between invocations (e.g. --split test for a
// report); evaluations are cached per setting.
type EvalSettings struct {
	// Split is the split scored: "val" (default) or "test" (or "train").
	Split string `json:"split"`
	// SigmaMs is the smoothing time scale of the spike-train metrics.
	SigmaMs float64 `json:"sigma_ms"`
	// NLLStride scores the NLL on every NLLStride-th window end (0:
	// evaluation.AutoStride).
	NLLStride int `json:"nll_stride"`
	// Stagger starts the rollouts at staggered phases.
	Stagger bool `json:"stagger"`
	// Batch is the number of windows per predictor call.
	Batch int `json:"batch"`
	// Resamples and Seed configure the bootstrap.
	Resamples int    `json:"resamples"`
	Seed      uint64 `json:"seed"`
	// GLM is the JSON file of the GLM baseline (`trainer glm`); empty for
	// none.
	GLM string `json:"glm,omitempty"`
	// Policy is the rollouts' spike policy (rollout.ParsePolicy; empty:
	// the median rule).
	Policy string `json:"policy,omitempty"`
	// Seconds, if positive, limits the rollouts to that many seconds of
	// the split after the first window (the NLL covers the whole split).
	Seconds float64 `json:"rollout_seconds,omitempty"`
	// BlockSeconds, if positive, keeps every cell's scores in time blocks
	// of that many seconds and gives each paired comparison a time-block x
	// cell bootstrap interval beside the cell-only one
	// (evaluation.Comparison.AddBlocks).
	BlockSeconds float64 `json:"block_seconds,omitempty"`
	// Compare lists extra paired comparisons "A:B" (A - B per cell) of
	// configurations or baselines (glm, zero), beyond the automatic ones.
	Compare []string `json:"compare,omitempty"`
}

// DefaultEvalSettings are the settings of `trainer experiment` without
// flags.
func DefaultEvalSettings() EvalSettings {
	return EvalSettings{Split: "val", SigmaMs: rollout.DefaultSigmaMs, Batch: 64,
		Resamples: rollout.DefaultResamples, Seed: 1}
}

func (e *EvalSettings) check() (rgc.Split, error) {
	split, err := rgc.ParseSplit(e.Split)
	if err != nil {
		return 0, fmt.Errorf("eval: split: %w", err)
	}
	switch {
	case e.NLLStride < 0:
		return 0, fmt.Errorf("eval: nll-stride %d: want 0 (auto) or more", e.NLLStride)
	case e.Batch < 1:
		return 0, fmt.Errorf("eval: batch %d: want at least 1", e.Batch)
	case e.Resamples < rollout.DefaultResamples:
		return 0, fmt.Errorf("eval: resamples %d: want at least %d", e.Resamples, rollout.DefaultResamples)
	case e.Seconds < 0 || e.Seconds > 1e6:
		return 0, fmt.Errorf("eval: rollout seconds %v: want 0 (the whole split) to 1e6", e.Seconds)
	case e.BlockSeconds < 0 || e.BlockSeconds > 1e6 || (e.BlockSeconds > 0 && e.blockBins() < 1):
		return 0, fmt.Errorf("eval: block seconds %v: want 0 (no time blocks) or at least one bin, up to 1e6", e.BlockSeconds)
	}
	for _, c := range e.Compare {
		a, b, ok := strings.Cut(c, ":")
		if !ok || a == "" || b == "" || a == b {
			return 0, fmt.Errorf("eval: comparison %q: want A:B with two different models", c)
		}
	}
	return split, nil
}

// runName names the run of a configuration and seed (its directory).
func runName(config string, seed uint64) string { return fmt.Sprintf("%s-seed%d", config, seed) }

// blockBins is BlockSeconds in bins (0: no time blocks).
func (e *EvalSettings) blockBins() int { return evaluation.BlockBins(e.BlockSeconds) }

// maxBins is Seconds in bins (0: the whole split).
func (e *EvalSettings) maxBins() int {
	if e.Seconds <= 0 {
		return 0
	}
	return int(e.Seconds * rgc.BinRateHz)
}
