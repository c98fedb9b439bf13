package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// jobsOptions is the tiny experiment with a grid of one configuration x 3
// seeds, run with jobs runs at once.
func jobsOptions(dir, data string, jobs int) Options {
	o := tinyOptions(dir, data)
	o.Plan.Configs, o.Plan.Seeds = []string{"gpt-a-cat-cpu"}, []uint64{1, 2, 3}
	o.Jobs = jobs
	return o
}

// TestJobsMatchSequential trains the same grid one run at a time, several
// at once, and with more jobs than runs, and checks that every run ends
// with the same steps, best checkpoint and validation NLL, and that the
// results files agree in everything but the times; then it checks the
// same of an experiment interrupted while two runs train at once and
// continued one run at a time.
func TestJobsMatchSequential(t *testing.T) {
	data := synthData(t)
	refDir := filepath.Join(t.TempDir(), "ref")
	ref, _ := runToEnd(t, jobsOptions(refDir, data, 1), nil)
	for _, tc := range []struct {
		name string
		jobs int
	}{
		{"2 jobs", 2},
		{"more jobs than runs", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "exp")
			o := jobsOptions(dir, data, tc.jobs)
			got, n := runToEnd(t, o, nil)
			if n != 0 {
				t.Fatalf("interrupted %d times", n)
			}
			sameResults(t, ref, got, refDir, dir)
			sameManifestRuns(t, refDir, dir)
			sameResultsFile(t, refDir, dir, "results-val.json")
			out := o.Out.(*bytes.Buffer).String()
			for i, seed := range o.Plan.Seeds {
				want := fmt.Sprintf("run %d/3 gpt-a-cat-cpu seed %d: trained, 12 steps", i+1, seed)
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
	t.Run("interrupted with 2 jobs, resumed with 1", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "exp")
		interruptTwoRuns(t, dir, data)
		got, n := runToEnd(t, jobsOptions(dir, data, 1), nil)
		if n != 0 {
			t.Errorf("resumed run interrupted %d times", n)
		}
		sameResults(t, ref, got, refDir, dir)
		sameManifestRuns(t, refDir, dir)
		sameResultsFile(t, refDir, dir, "results-val.json")
	})
}

// interruptTwoRuns runs the experiment of jobsOptions in dir with 2 jobs
// and interrupts it while its first two runs train, the first past its
// boundary at step 4, the second before its first boundary.
func interruptTwoRuns(t *testing.T, dir, data string) {
	t.Helper()
	o := jobsOptions(dir, data, 2)
	first, second := runName("gpt-a-cat-cpu", 1), runName("gpt-a-cat-cpu", 2)
	// The first run, at step 6 (past its boundary at 4), waits until the
	// second has taken step 3, then interrupts both; the second waits there
	// for the interruption.
	secondAt3 := make(chan struct{})
	var closeOnce sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.hook = func(ev, run string, step int) {
		if ev != "step" {
			return
		}
		switch {
		case run == second && step == 3:
			closeOnce.Do(func() { close(secondAt3) })
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Minute):
				t.Error("the first run never interrupted the experiment")
			}
		case run == first && step == 6:
			select {
			case <-secondAt3:
			case <-time.After(2 * time.Minute):
				t.Error("the second run never reached step 3 while the first trained")
			}
			cancel()
		}
	}
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: error %v\n%s", err, o.Out)
	}
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status   string
		boundary int
	}{first: {StatusTraining, 4}, second: {StatusTraining, 0}, runName("gpt-a-cat-cpu", 3): {StatusPending, 0}}
	for _, r := range m.Runs {
		if w := want[r.Name]; r.Status != w.status || r.BoundaryStep != w.boundary {
			t.Errorf("after the interruption run %s is %s from step %d, want %s from step %d", r.Name, r.Status, r.BoundaryStep, w.status, w.boundary)
		}
	}
}

// sameManifestRuns checks that two experiments' manifests record the same
// outcome for every run: status, steps, best step and validation NLL,
// early stop, samples and the number of cached evaluations (their names
// hash the checkpoint, whose provenance names the directory).
func sameManifestRuns(t *testing.T, wantDir, gotDir string) {
	t.Helper()
	want, err := LoadManifest(wantDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadManifest(gotDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != len(want.Runs) {
		t.Fatalf("manifest: %d runs, want %d", len(got.Runs), len(want.Runs))
	}
	for i, w := range want.Runs {
		g := got.Runs[i]
		if g.Name != w.Name || g.Status != w.Status || g.Steps != w.Steps || g.BestStep != w.BestStep || g.BestVal != w.BestVal ||
			g.Stopped != w.Stopped || g.Samples != w.Samples || len(g.Evaluations) != len(w.Evaluations) {
			t.Errorf("manifest run %d:\n got %+v\nwant %+v", i, *g, *w)
		}
	}
}

// sameResultsFile checks that two results files are equal but for the
// times they record (the *_seconds fields and when they were written).
func sameResultsFile(t *testing.T, wantDir, gotDir, name string) {
	t.Helper()
	read := func(dir string) any {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		return dropTimes(v)
	}
	if want, got := read(wantDir), read(gotDir); !reflect.DeepEqual(want, got) {
		t.Errorf("%s differs beyond its times", name)
	}
}

// dropTimes removes the times from decoded JSON: keys ending in _seconds,
// and "written".
func dropTimes(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.HasSuffix(k, "_seconds") || k == "written" {
				delete(v, k)
				continue
			}
			v[k] = dropTimes(e)
		}
	case []any:
		for i, e := range v {
			v[i] = dropTimes(e)
		}
	}
	return v
}

// TestFlightsLine checks the terminal status line of several runs in
// training: one compact entry per run, in grid order.
func TestFlightsLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget Budget
		steps  map[int]int
		want   string
	}{
		{"step budget", Budget{Steps: 2000}, map[int]int{2: 900, 0: 700},
			"run 1/3 gpt-a-cat-cpu s1 700/2000 | run 3/3 gpt-b-cat-cpu s2 900/2000"},
		{"time budget", Budget{Time: Duration(time.Minute)}, map[int]int{1: 5},
			"run 2/3 gpt-a-logmix-cpu s1 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &exp{plan: Plan{Budget: tc.budget, Batch: 4}, flying: map[int]*flight{}, grid: []*RunState{
				{Config: "gpt-a-cat-cpu", Seed: 1}, {Config: "gpt-a-logmix-cpu", Seed: 1}, {Config: "gpt-b-cat-cpu", Seed: 2}}}
			for i, s := range tc.steps {
				x.flying[i] = &flight{i: i, step: s}
			}
			if got := x.flightsLine(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
