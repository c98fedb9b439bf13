package experiment

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     Budget
		kind  string
		steps int
		err   string
	}{
		{"steps", Budget{Steps: 2000}, "steps", 2000, ""},
		{"samples rounds up", Budget{Samples: 1000}, "samples", 16, ""},
		{"time", Budget{Time: Duration(time.Minute)}, "time", noStepCap, ""},
		{"time with a cap", Budget{Time: Duration(time.Minute), Steps: 50}, "time", 50, ""},
		{"none", Budget{}, "steps", 0, "give steps"},
		{"samples and steps", Budget{Samples: 10, Steps: 10}, "samples", 0, "one of"},
		{"negative", Budget{Steps: -1}, "steps", 0, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.check()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("check: %v, want an error mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k, s := tc.b.Kind(), tc.b.steps(64); k != tc.kind || s != tc.steps {
				t.Errorf("kind %s, steps %d; want %s, %d", k, s, tc.kind, tc.steps)
			}
		})
	}
}

func TestPlanNormalise(t *testing.T) {
	good := func() Plan {
		return Plan{Data: "d", Cells: "quality", Configs: []string{"gpt-a-cat-cpu", "gpt-b-logmix"}, Seeds: []uint64{1, 2},
			Budget: Budget{Steps: 10}, Batch: 4, LR: 1e-3, ValEvery: 4, ValWindows: 8, Segment: 10, Threads: 1}
	}
	p := good()
	if err := p.normalise(3); err != nil {
		t.Fatal(err)
	}
	if p.Segment != 12 {
		t.Errorf("segment %d, want 10 rounded up to a multiple of val-every 4", p.Segment)
	}
	for _, tc := range []struct {
		change func(*Plan)
		want   string
	}{
		{func(p *Plan) { p.Data = "" }, "recording"},
		{func(p *Plan) { p.Cells = "some" }, "quality or all"},
		{func(p *Plan) { p.Configs = nil }, "no configurations"},
		{func(p *Plan) { p.Configs = []string{"gpt-z-cat"} }, "gpt-z"},
		{func(p *Plan) { p.Configs = []string{"gpt-a-cat", "gpt-a-cat-paper"} }, "twice"},
		{func(p *Plan) { p.Seeds = []uint64{3, 3} }, "seed 3 given twice"},
		{func(p *Plan) { p.Seeds = nil }, "no seeds"},
		{func(p *Plan) { p.Budget = Budget{} }, "budget"},
		{func(p *Plan) { p.Batch = 0 }, "batch"},
		{func(p *Plan) { p.LR = 0 }, "learning rate"},
		{func(p *Plan) { p.Threads = 0 }, "threads"},
		{func(p *Plan) { p.Segment = -1 }, "segment"},
	} {
		p := good()
		tc.change(&p)
		if err := p.normalise(3); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one mentioning %q", err, tc.want)
		}
	}
}

func TestEvalSettingsCheck(t *testing.T) {
	for _, tc := range []struct {
		change func(*EvalSettings)
		want   string
	}{
		{func(e *EvalSettings) {}, ""},
		{func(e *EvalSettings) { e.Split = "dev" }, "split"},
		{func(e *EvalSettings) { e.Resamples = 100 }, "resamples"},
		{func(e *EvalSettings) { e.Batch = 0 }, "batch"},
		{func(e *EvalSettings) { e.NLLStride = -1 }, "nll-stride"},
		{func(e *EvalSettings) { e.BlockSeconds = -1 }, "block seconds"},
		{func(e *EvalSettings) { e.BlockSeconds = 1e-5 }, "block seconds"},
		{func(e *EvalSettings) { e.BlockSeconds = 5 }, ""},
		{func(e *EvalSettings) { e.Compare = []string{"a"} }, "A:B"},
		{func(e *EvalSettings) { e.Compare = []string{"a:a"} }, "A:B"},
	} {
		e := DefaultEvalSettings()
		tc.change(&e)
		_, err := e.check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestRunChecksFirst: settings that would fail only at the report fail
// before any training.
func TestRunChecksFirst(t *testing.T) {
	data := synthData(t)
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.Eval.GLM = "../models/glm-chicken-17-08-21.json" }, "has no model of cells"},
		{func(o *Options) { o.Eval.GLM = "nope.json" }, "nope.json"},
		{func(o *Options) { o.Eval.Compare = []string{"gpt-a-cat-cpu:glm"} }, "no model glm"},
		{func(o *Options) { o.Eval.Compare = []string{"gpt-b-cat:zero"} }, "no model gpt-b-cat"},
		{func(o *Options) { o.Eval.Split = "dev" }, "split"},
		{func(o *Options) { o.Plan.Configs = []string{"gpt-a-dog"} }, "head"},
		{func(o *Options) { o.Plan.Data = filepath.Join(t.TempDir(), "missing") }, "missing"},
		{func(o *Options) { o.Dir = "" }, "no directory"},
	} {
		dir := filepath.Join(t.TempDir(), "exp")
		o := tinyOptions(dir, data)
		tc.change(&o)
		_, err := Run(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one mentioning %q", err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
			t.Errorf("%q: trained before failing", tc.want)
		}
	}
}
