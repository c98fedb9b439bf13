package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"rgcpred/evaluation"
	"strings"
	"sync"
	"testing"
	"time"

	"rgcpred/model"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
)

// tinyOptions is a tiny experiment on the synthetic recording in data: 2
// configurations x 2 seeds, 12 steps of batch 4, validation every 2 steps,
// segment boundaries every 4, one thread.
func tinyOptions(dir, data string) Options {
	return Options{
		Dir: dir,
		Plan: Plan{Data: data, Cells: "all", Configs: []string{"gpt-a-cat-cpu", "gpt-a-logmix-cpu"}, Seeds: []uint64{1, 2},
			Budget: Budget{Steps: 12}, Batch: 4, LR: 3e-3, ValEvery: 2, ValWindows: 16, Segment: 4, Threads: 1},
		Eval:    EvalSettings{Split: "val", SigmaMs: 60, NLLStride: 50, Batch: 16, Resamples: 2000, Seed: 1},
		Command: []string{"test"},
		Out:     &bytes.Buffer{},
	}
}

// synthData writes the tiny recording into a directory of t.
func synthData(t *testing.T) string {
	t.Helper()
	return testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
}

// runToEnd runs the experiment, restarting it after every interruption,
// and returns its results and how many times it was interrupted.
func runToEnd(t *testing.T, o Options, interrupt func(event, run string, step int) bool) (*Results, int) {
	t.Helper()
	n := 0
	for {
		ctx, cancel := context.WithCancel(context.Background())
		o.hook = func(event, run string, step int) {
			if interrupt != nil && interrupt(event, run, step) {
				cancel()
			}
		}
		res, err := Run(ctx, o)
		cancel()
		if err == nil {
			return res, n
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v\n%s", err, o.Out)
		}
		n++
		if n > 10 {
			t.Fatal("interrupted more than 10 times")
		}
	}
}

// sameResults checks that two experiments scored every cell of every model
// identically and chose the same best checkpoints.
func sameResults(t *testing.T, want, got *Results, wantDir, gotDir string) {
	t.Helper()
	if len(want.Models) != len(got.Models) {
		t.Fatalf("%d models, want %d", len(got.Models), len(want.Models))
	}
	for i, w := range want.Models {
		g := got.Models[i]
		if !reflect.DeepEqual(w.Cells, g.Cells) || !reflect.DeepEqual(w.Summary, g.Summary) {
			t.Errorf("%s: scores differ:\n got %+v\nwant %+v", w.Name, g.Cells, w.Cells)
		}
		for j, wr := range w.Runs {
			gr := g.Runs[j]
			if wr.Steps != gr.Steps || wr.BestStep != gr.BestStep || wr.BestVal != gr.BestVal || !reflect.DeepEqual(wr.Cells, gr.Cells) {
				t.Errorf("%s seed %d: steps %d, best %.6f at %d; want %d, %.6f at %d", w.Name, wr.Seed,
					gr.Steps, gr.BestVal, gr.BestStep, wr.Steps, wr.BestVal, wr.BestStep)
			}
			a, b := loadWeights(t, filepath.Join(wantDir, wr.Dir, "model.ckpt")), loadWeights(t, filepath.Join(gotDir, gr.Dir, "model.ckpt"))
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s seed %d: best checkpoints differ", w.Name, wr.Seed)
			}
		}
	}
	if !reflect.DeepEqual(want.Comparisons, got.Comparisons) {
		t.Errorf("comparisons differ")
	}
}

func loadWeights(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	return ck.Weights.Tensors
}

// once wraps an interruption rule so that each (event, run, step) it
// matches interrupts only once: a restarted run retraces its steps. It is
// safe for concurrent use, as the hook of concurrent runs.
func once(match func(event, run string, step int) bool) func(event, run string, step int) bool {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(event, run string, step int) bool {
		mu.Lock()
		defer mu.Unlock()
		key := fmt.Sprint(event, run, step)
		if !match(event, run, step) || seen[key] {
			return false
		}
		seen[key] = true
		return true
	}
}

// TestResumeMatchesUninterrupted interrupts the tiny experiment at several
// points, with a cancelled context (as SIGINT and SIGTERM do) and with
// SIGKILL, restarts it, and checks that it ends with exactly the results
// of an uninterrupted run: the same steps, best checkpoints and scores.
func TestResumeMatchesUninterrupted(t *testing.T) {
	data := synthData(t)
	refDir := filepath.Join(t.TempDir(), "ref")
	ref, n := runToEnd(t, tinyOptions(refDir, data), nil)
	if n != 0 || len(ref.Models) != 3 {
		t.Fatalf("reference: %d interruptions, %d models", n, len(ref.Models))
	}
	second := runName("gpt-a-logmix-cpu", 1)
	for _, tc := range []struct {
		name      string
		interrupt func(event, run string, step int) bool
		wantStops int
	}{
		{"after the first run", once(func(ev, run string, _ int) bool { return ev == "trained" && run == runName("gpt-a-cat-cpu", 1) }), 1},
		{"at a boundary", once(func(ev, run string, step int) bool { return ev == "boundary" && run == second && step == 4 }), 1},
		{"mid-segment", once(func(ev, run string, step int) bool { return ev == "step" && run == second && step == 6 }), 1},
		{"twice", once(func(ev, run string, step int) bool {
			return ev == "step" && (run == second && step == 3 || run == runName("gpt-a-cat-cpu", 2) && step == 11)
		}), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "exp")
			got, n := runToEnd(t, tinyOptions(dir, data), tc.interrupt)
			if n != tc.wantStops {
				t.Errorf("interrupted %d times, want %d", n, tc.wantStops)
			}
			sameResults(t, ref, got, refDir, dir)
		})
	}
	t.Run("killed", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a process")
		}
		dir := filepath.Join(t.TempDir(), "exp")
		killMidRun(t, dir, data, runName("gpt-a-logmix-cpu", 1))
		got, n := runToEnd(t, tinyOptions(dir, data), nil)
		if n != 0 {
			t.Errorf("interrupted %d times", n)
		}
		sameResults(t, ref, got, refDir, dir)
	})
}

// TestKillHelper is the experiment process that killMidRun kills; it runs
// only when killMidRun starts it.
func TestKillHelper(t *testing.T) {
	spec := os.Getenv("EXPERIMENT_KILL_HELPER")
	if spec == "" {
		t.Skip("helper process of TestResumeMatchesUninterrupted/killed")
	}
	dir, data, _ := strings.Cut(spec, "|")
	o := tinyOptions(dir, data)
	// Slow the steps down so that the parent sees the run mid-way.
	o.hook = func(ev, _ string, _ int) {
		if ev == "step" {
			time.Sleep(30 * time.Millisecond)
		}
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// killMidRun runs the tiny experiment in dir in a process of its own and
// kills it with SIGKILL once run has committed a segment boundary, before
// it finishes.
func killMidRun(t *testing.T, dir, data, run string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EXPERIMENT_KILL_HELPER="+dir+"|"+data)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for boundary := 0; boundary == 0; {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the helper never reached a boundary of run %s:\n%s", run, out.String())
		}
		time.Sleep(5 * time.Millisecond)
		m, err := LoadManifest(dir)
		if err != nil {
			continue
		}
		for _, r := range m.Runs {
			if r.Name == run && r.Status == StatusTraining {
				boundary = r.BoundaryStep
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.Runs {
		if r.Name == run {
			if r.Status != StatusTraining {
				t.Fatalf("run %s is %s after the kill; the test needs it killed mid-way", run, r.Status)
			}
			t.Logf("killed in run %s after its boundary at step %d", run, r.BoundaryStep)
		}
	}
}

// TestRunOutputs checks the files and output of a finished experiment,
// that a second invocation trains and evaluates nothing, and that another
// split is evaluated without retraining.
func TestRunOutputs(t *testing.T) {
	data := synthData(t)
	dir := filepath.Join(t.TempDir(), "exp")
	o := tinyOptions(dir, data)
	o.Plan.Configs, o.Plan.Seeds = []string{"gpt-a-cat-cpu", "gpt-a-logmix-cpu"}, []uint64{7}
	o.Plan.Budget = Budget{Samples: 24} // 6 steps of batch 4
	o.Eval.Compare = []string{"gpt-a-logmix-cpu:zero"}
	out := o.Out.(*bytes.Buffer)
	res, _ := runToEnd(t, o, nil)
	text := out.String()
	if strings.Contains(text, "\r") {
		t.Error("progress lines carry carriage returns on a non-terminal")
	}
	for _, want := range []string{"run 1/2 gpt-a-cat-cpu seed 7: step", "ETA", "val NLL", "cat - logmix (gpt-a-cpu)", "gpt-a-logmix-cpu - zero"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, f := range []string{"manifest.json", "results-val.json", "figure-val.png", "figure-val.svg",
		"runs/gpt-a-cat-cpu-seed7/model.ckpt", "runs/gpt-a-cat-cpu-seed7/model.ckpt.resume", "runs/gpt-a-cat-cpu-seed7/train.log"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if png, _ := os.ReadFile(filepath.Join(dir, "figure-val.png")); !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Error("figure-val.png is not a PNG")
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "figure-val.svg")); !bytes.Contains(svg, []byte("Schreiber")) {
		t.Error("figure-val.svg lacks the Schreiber panel")
	}
	var fromFile Results
	data2, err := os.ReadFile(filepath.Join(dir, "results-val.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data2, &fromFile); err != nil {
		t.Fatal(err)
	}
	if len(fromFile.Models) != 3 || fromFile.Models[0].Runs[0].Steps != 6 || fromFile.Models[0].Runs[0].Samples != 24 ||
		fromFile.Models[2].Kind != "zero" || len(fromFile.Comparisons) != 4 {
		t.Errorf("results: %d models, runs %+v, %d comparisons", len(fromFile.Models), fromFile.Models[0].Runs, len(fromFile.Comparisons))
	}
	for _, m := range res.Models {
		for _, name := range evaluation.MetricNames {
			if s := m.Summary[name]; s.N != 2 || !(s.Lo <= s.IQM && s.IQM <= s.Hi) {
				t.Errorf("%s %s: %+v", m.Name, name, s)
			}
		}
	}

	// Again: everything is cached.
	out.Reset()
	again, _ := runToEnd(t, o, nil)
	if strings.Contains(out.String(), "scoring") || strings.Contains(out.String(), "training") {
		t.Errorf("second invocation trained or scored:\n%s", out.String())
	}
	if !reflect.DeepEqual(again.Models, res.Models) {
		t.Error("second invocation's results differ")
	}

	// The test split: evaluated, not retrained.
	out.Reset()
	o.Eval.Split = "test"
	test, _ := runToEnd(t, o, nil)
	if strings.Contains(out.String(), "training") || !strings.Contains(out.String(), "scoring") || test.Split != "test" {
		t.Errorf("test split: %s\n%s", test.Split, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "results-test.json")); err != nil {
		t.Error(err)
	}

	// Time blocks: scored again (they are part of the cache key), every
	// comparison with a block x cell interval beside the cell-only one.
	out.Reset()
	o.Eval.Split, o.Eval.BlockSeconds = "val", 0.25
	blocks, _ := runToEnd(t, o, nil)
	text = out.String()
	if strings.Contains(text, "training") || !strings.Contains(text, "scoring") || !strings.Contains(text, "CI over 0.25 s time blocks x cells") {
		t.Errorf("time blocks: not scored again, or no block interval in the table:\n%s", text)
	}
	if len(blocks.Comparisons) != 4 {
		t.Fatalf("%d comparisons with time blocks, want 4", len(blocks.Comparisons))
	}
	for _, c := range blocks.Comparisons {
		for _, name := range evaluation.MetricNames {
			d := c.Metrics[name]
			if d.Block == nil || d.Block.Blocks < 2 || d.Block.Seconds != 0.25 || !(d.Block.Lo <= d.Block.Hi) {
				t.Errorf("%s %s: block interval %+v", c.Name, name, d.Block)
			}
		}
	}
	if !reflect.DeepEqual(blocks.Models[0].Summary, res.Models[0].Summary) {
		t.Error("scores kept in time blocks differ from those without")
	}
}

// TestEvalKeyWithoutBlocks: a key without time blocks leaves the field out
// of its JSON, so its hash (the cache file's name) is that of a key
// without the field and evaluations cached without blocks stay valid;
// with blocks the key differs.
func TestEvalKeyWithoutBlocks(t *testing.T) {
	k := evalKey{Kind: "checkpoint", Split: "val", SigmaMs: 60, Batch: 64, Threads: 2, CellIDs: []int{1, 2}}
	data, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"checkpoint","split":"val","sigma_ms":60,"nll_stride":0,"stagger":false,"batch":64,"threads":2,"cell_ids":[1,2]}`; string(data) != want {
		t.Errorf("key %s, want %s", data, want)
	}
	h := k.hash()
	k.BlockBins = 4960
	if k.hash() == h {
		t.Error("a key with time blocks hashes as one without")
	}
}

// TestPlanMismatch: an experiment directory refuses a different plan, but
// accepts a larger grid.
func TestPlanMismatch(t *testing.T) {
	data := synthData(t)
	dir := filepath.Join(t.TempDir(), "exp")
	o := tinyOptions(dir, data)
	o.Plan.Configs, o.Plan.Seeds, o.Plan.Budget = []string{"gpt-a-cat-cpu"}, []uint64{1}, Budget{Steps: 4}
	runToEnd(t, o, nil)
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.Plan.Batch = 8 }, "batch"},
		{func(o *Options) { o.Plan.Budget = Budget{Steps: 5} }, "budget"},
		{func(o *Options) { o.Plan.Threads = 2 }, "threads"},
		{func(o *Options) { o.Plan.LR = 1e-2 }, "lr"},
	} {
		o2 := tinyOptions(dir, data)
		o2.Plan.Configs, o2.Plan.Seeds, o2.Plan.Budget = []string{"gpt-a-cat-cpu"}, []uint64{1}, Budget{Steps: 4}
		tc.change(&o2)
		_, err := Run(context.Background(), o2)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--resume") {
			t.Errorf("changed %s: error %v", tc.want, err)
		}
	}
	// A second seed joins the grid; the first run is not retrained.
	o.Plan.Seeds = []uint64{1, 2}
	out := o.Out.(*bytes.Buffer)
	out.Reset()
	res, _ := runToEnd(t, o, nil)
	if strings.Count(out.String(), ": training\n") != 1 || len(res.Models[0].Runs) != 2 {
		t.Errorf("growing the grid: %d runs\n%s", len(res.Models[0].Runs), out.String())
	}
}
