package train

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rgcpred/model"
	"rgcpred/model/graph"
	"rgcpred/rgc"
)

const shipped = "../../data/chicken-17-08-21"

// tinyConfig is a small configuration with every layer type.
func tinyConfig(head string, cells int) model.Config {
	return model.Config{
		Stem: model.StemGPTA, Head: head, NumCells: cells,
		InRows: 5, InBins: 1024, StemCh: 2, StemKernel: 5,
		BlockMid: 4, BlockOut: 4, BlockKernel: 3, SEReduction: 2,
		Layers: 1, Heads: 2, HeadDim: 2, Mixtures: 3, Classes: 81,
	}
}

// TestAdamWStep checks two AdamW steps against the update rule computed by
// hand: bias-corrected moments, decoupled decay on weights only.
func TestAdamWStep(t *testing.T) {
	c := tinyConfig(model.HeadCat, 2)
	w := model.NewWeights(c)
	const wn, bn = "head.weight", "head.bias"
	w.Tensors[wn][0], w.Tensors[bn][0] = 0.5, 0.5
	grads := []float32{0.2, -0.1}
	o := NewAdamW()
	lr := 0.01
	x, xb := 0.5, 0.5
	m, v := 0.0, 0.0
	for s, g := range grads {
		o.Update(w, func(name string) []float32 {
			if name == wn || name == bn {
				gv := make([]float32, len(w.Tensors[name]))
				gv[0] = g
				return gv
			}
			return nil
		}, lr)
		m = 0.9*m + 0.1*float64(g)
		v = 0.99*v + 0.01*float64(g)*float64(g)
		mh := m / (1 - math.Pow(0.9, float64(s+1)))
		vh := v / (1 - math.Pow(0.99, float64(s+1)))
		step := lr * mh / (math.Sqrt(vh) + 1e-5)
		x = x*(1-lr*0.02) - step
		xb -= step
	}
	if got := float64(w.Tensors[wn][0]); math.Abs(got-x) > 1e-6 {
		t.Errorf("weight after 2 steps %.7f, want %.7f", got, x)
	}
	if got := float64(w.Tensors[bn][0]); math.Abs(got-xb) > 1e-6 {
		t.Errorf("bias (no decay) after 2 steps %.7f, want %.7f", got, xb)
	}
	if w.Tensors["cnn.bn1.running_var"][0] != 1 {
		t.Error("running statistics must not be optimised")
	}
}

func TestOneCycle(t *testing.T) {
	s := NewOneCycle(1e-3, 1001)
	tests := []struct {
		step int
		want float64
	}{{0, 1e-3 / 25}, {250, 1e-3}, {900, 1e-3 / 25}, {1000, 1e-7}}
	for _, tc := range tests {
		if got := s.Rate(tc.step); math.Abs(got-tc.want) > 1e-3*tc.want {
			t.Errorf("Rate(%d) = %.4g, want %.4g", tc.step, got, tc.want)
		}
	}
	for i := 1; i < 1000; i++ {
		up := i <= 250
		if d := s.Rate(i) - s.Rate(i-1); (up && d < 0) || (!up && d > 1e-12) {
			t.Fatalf("rate not %s at step %d", map[bool]string{true: "rising", false: "falling"}[up], i)
		}
	}
	if a, b := s.RateAt(0.5), s.Rate(500); math.Abs(a-b) > 1e-3*b {
		t.Errorf("RateAt(0.5) %.4g != Rate(500) %.4g", a, b)
	}
}

func TestEarlyStop(t *testing.T) {
	e := NewEarlyStop()
	// Improving losses never stop.
	for i := 0; i < 30; i++ {
		if e.Observe(2-0.01*float64(i), true) {
			t.Fatalf("stopped while improving at evaluation %d", i)
		}
	}
	// A plateau stops after 12 evaluations without a new smoothed best,
	// but only once past half the run.
	n := 0
	for !e.Observe(5, n >= 20) {
		n++
		if n > 100 {
			t.Fatal("never stopped on a plateau")
		}
	}
	if n != 20 {
		t.Errorf("stopped after %d plateau evaluations, want 20 (the half-way mark)", n)
	}
	e = NewEarlyStop()
	e.Observe(1, true)
	k := 0
	for !e.Observe(5, true) {
		k++
	}
	if k != 11 {
		t.Errorf("stopped after %d+1 evaluations without improvement, want 12", k)
	}
}

// TestOverfitOneBatch trains the tiny model on one fixed batch: graph,
// gradients and AdamW together must drive the loss well down.
func TestOverfitOneBatch(t *testing.T) {
	for _, head := range []string{model.HeadCat, model.HeadLogMix} {
		t.Run(head, func(t *testing.T) {
			c := tinyConfig(head, 2)
			w := model.InitWeights(c, rand.New(rand.NewPCG(1, 2)))
			g, err := graph.New(w, 8, graph.Options{Training: true, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			x := make([]float32, 8*rgc.WindowLen)
			for i := range x {
				x[i] = float32(rng.IntN(2))
			}
			rows, tg := make([]int, 8), make([]int, 8)
			for i := range rows {
				rows[i], tg[i] = i%2, rng.IntN(81)
			}
			if err := g.SetInputs(x, rows, tg); err != nil {
				t.Fatal(err)
			}
			o := NewAdamW()
			var first, last float32
			for s := 0; s < 60; s++ {
				l, err := g.Run()
				if err != nil {
					t.Fatal(err)
				}
				if s == 0 {
					first = l
				}
				last = l
				o.Update(w, g.Grad, 1e-2)
			}
			if !(last < 0.5*first) {
				t.Errorf("loss %.3f -> %.3f after 60 steps on one batch, want below half", first, last)
			}
		})
	}
}

// TestRunInterruptResume trains the tiny model on the shipped recording,
// interrupts it (cancelled context), resumes and finishes: checkpoints
// load, carry provenance and the resumed run ends at the planned step.
func TestRunInterruptResume(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:3]
	dir := t.TempDir()
	out := filepath.Join(dir, "m.ckpt")
	var log bytes.Buffer
	o := Options{Data: "shipped", Rec: rec, Cells: cells, Config: tinyConfig(model.HeadCat, 3),
		Steps: 8, Batch: 4, LR: 3e-3, ValEvery: 2, ValWindows: 16, Seed: 3, Threads: 2, Out: out, Log: &log}

	// Interrupt after the first validation.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := os.Stat(out + ".resume"); err == nil {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	res, err := Run(ctx, o)
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Steps >= 8 || res.Steps < 2 {
		t.Fatalf("first run: interrupted %v at step %d, want an interruption between 2 and 8\n%s", res.Interrupted, res.Steps, log.String())
	}
	ck, err := model.LoadCheckpoint(out + ".resume")
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.TrainState) == 0 || ck.Provenance.Steps != res.Steps {
		t.Fatalf("resume checkpoint: %d bytes of state, %d steps; want state and %d steps", len(ck.TrainState), ck.Provenance.Steps, res.Steps)
	}

	o2 := o
	o2.Resume = out + ".resume"
	o2.Steps = 1000    // ignored: the plan comes from the resume state,
	o2.ValWindows = 64 // the validation plan too (the best is chosen on one set)
	o2.ValEvery = 3
	var log2 bytes.Buffer
	o2.Log = &log2
	res2, err := Run(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log2.String(), "on 16 windows") {
		t.Errorf("resumed run's log does not validate on the run's 16 windows:\n%s", log2.String())
	}
	if res2.Interrupted || res2.Steps != 8 {
		t.Fatalf("resumed run ended at step %d (interrupted %v), want 8", res2.Steps, res2.Interrupted)
	}
	best, err := model.LoadCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	if best.Provenance.ValNLL != res2.BestVal || best.Provenance.Steps != res2.BestStep || best.Provenance.ZeroInputNLL <= 0 {
		t.Errorf("best checkpoint provenance %+v, want val %.4f at step %d and a zero-input NLL", best.Provenance, res2.BestVal, res2.BestStep)
	}
	if len(best.CellIDs) != 3 || best.CellIDs[0] != rec.Cells[cells[0]].ClusterID || best.BinRateHz != rec.BinRateHz() {
		t.Errorf("best checkpoint cells %v at %.2f Hz", best.CellIDs, best.BinRateHz)
	}
	if _, err := os.Stat(filepath.Join(dir, "m-loss.png")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "m-loss.svg")); err != nil {
		t.Errorf("no loss curve: %v", err)
	}
	sc, err := Score(context.Background(), best, rec, rgc.Val, cells, 40, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{sc.Model, sc.ZeroPooled, sc.ZeroPerCell} {
		if !(v > 0 && v < 10) {
			t.Errorf("score %+v: NLLs must be positive and finite", sc)
		}
	}
	if sc.N != 40 || !(sc.DiffSE > 0) {
		t.Errorf("score %+v: want 40 windows and a standard error", sc)
	}
}

// TestRunInit checks a warm restart: with a negligible rate the run keeps
// the weights it started from, moves to other cells (shared rows kept, new
// ones at the mean row), and a checkpoint of another configuration is refused.
func TestRunInit(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:3]
	dir := t.TempDir()
	first := filepath.Join(dir, "first.ckpt")
	var log bytes.Buffer
	o := Options{Data: "shipped", Rec: rec, Cells: cells, Config: tinyConfig(model.HeadCat, 3),
		Steps: 4, Batch: 4, LR: 3e-3, ValEvery: 2, ValWindows: 16, Seed: 3, Threads: 2, Out: first, Log: &log}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	init, err := model.LoadCheckpoint(first)
	if err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.Init, o2.LR, o2.Seed, o2.Out = first, 1e-12, 9, filepath.Join(dir, "second.ckpt")
	if _, err := Run(context.Background(), o2); err != nil {
		t.Fatal(err)
	}
	second, err := model.LoadCheckpoint(o2.Out)
	if err != nil {
		t.Fatal(err)
	}
	fresh := model.InitWeights(o.Config, rand.New(rand.NewPCG(9, 0x5eed)))
	for _, name := range []string{"cnn.conv1.weight", "gpt.blocks.0.attn.qkv.weight", "head.weight"} {
		a, b, f := init.Weights.Get(name), second.Weights.Get(name), fresh.Get(name)
		if a == nil {
			t.Fatalf("no weight %s", name)
		}
		var dInit, dFresh float64
		for i := range a {
			dInit = math.Max(dInit, math.Abs(float64(a[i]-b[i])))
			dFresh = math.Max(dFresh, math.Abs(float64(f[i]-b[i])))
		}
		if dInit > 1e-6 || dFresh < 1e-3 {
			t.Errorf("%s: max difference %.2g from the init checkpoint (want <= 1e-6), %.2g from a fresh initialisation (want >= 1e-3)", name, dInit, dFresh)
		}
	}
	// Other cells: the shared cells keep their rows, a new one starts at
	// the mean of the init checkpoint's rows.
	o3 := o2
	o3.Cells, o3.Out = rec.QualityCells()[1:5], filepath.Join(dir, "third.ckpt")
	o3.Config.NumCells = 4
	if _, err := Run(context.Background(), o3); err != nil {
		t.Fatalf("init checkpoint of other cells: %v", err)
	}
	third, err := model.LoadCheckpoint(o3.Out)
	if err != nil {
		t.Fatal(err)
	}
	d := o.Config.Width()
	from, to := init.Weights.Get(model.ParamCellEmb), third.Weights.Get(model.ParamCellEmb)
	for j := range d {
		mean := (from[j] + from[d+j] + from[2*d+j]) / 3
		want := []float32{from[d+j], from[2*d+j], mean, mean}
		for r, w := range want {
			if got := to[r*d+j]; math.Abs(float64(got-w)) > 1e-6 {
				t.Fatalf("cell embedding row %d col %d: %g, want %g", r, j, got, w)
			}
		}
	}
	o4 := o2
	o4.Config.Layers++
	if _, err := Run(context.Background(), o4); err == nil {
		t.Error("want an error for an init checkpoint of another configuration")
	}
}

func TestLRFind(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:2]
	var log bytes.Buffer
	o := Options{Rec: rec, Cells: cells, Config: tinyConfig(model.HeadCat, 2), Batch: 8, Seed: 1, Threads: 2, Log: &log}
	r, err := LRFind(context.Background(), o, 1e-5, 10, 30, LRFindOptions{ProbeWindows: 16, Points: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ProbeRates) < 3 || len(r.ProbeRates) != len(r.ProbeLosses) || len(r.Rates) < len(r.ProbeRates) || !(r.Suggested >= 1e-5 && r.Suggested <= 10) || r.Suggested > math.Max(r.MinRate, 1e-5) {
		t.Errorf("lr-find: %d points, min at %.3g, suggested %.3g", len(r.Rates), r.MinRate, r.Suggested)
	}
	for i := 1; i < len(r.Rates); i++ {
		if !(r.Rates[i] > r.Rates[i-1]) {
			t.Fatal("rates not increasing")
		}
	}
	if files, err := r.Plot(filepath.Join(t.TempDir(), "lr.svg"), "test"); err != nil || len(files) != 2 {
		t.Errorf("lr-find plot: files %q, error %v; want an SVG and a PNG", files, err)
	}
}

func TestSuggestRate(t *testing.T) {
	rates := []float64{1e-5, 1e-4, 1e-3, 1e-2, 1e-1}
	for _, tc := range []struct {
		name            string
		losses          []float64
		minRate         float64
		steep, suggests float64
	}{
		{"valley", []float64{1.0, 0.98, 0.80, 0.70, 2.0}, 1e-2, 1e-3, 1e-3},
		{"steepest early", []float64{1.0, 0.70, 0.65, 0.64, 2.0}, 1e-2, 1e-4, 1e-4},
		{"never falls", []float64{1.0, 1.1, 1.2, 1.5, 2.0}, 1e-5, 0, 1e-5},
		{"flat then rise", []float64{1.0, 1.0, 1.0, 1.0, 2.0}, 1e-2, 0, 1e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steep, sug := suggestRate(rates, tc.losses, tc.minRate, 1e-5)
			if steep != tc.steep || math.Abs(sug-tc.suggests) > 1e-12 {
				t.Errorf("steepest %g, suggested %g; want %g, %g", steep, sug, tc.steep, tc.suggests)
			}
		})
	}
}

// TestLogMixInit checks that a logmix head starts near the zero-input
// model: the cross-entropy of the initial mixture's class masses against
// the shipped recording's pooled class frequencies exceeds their entropy
// (the zero-input NLL) by little.
func TestLogMixInit(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	pooled, _ := ClassFrequencies(rec, rgc.Train, rec.QualityCells())
	for _, tc := range []struct {
		mixtures  int
		maxExcess float64
	}{{64, 0.03}, {16, 0.06}, {3, 0.5}} {
		q := make([]float32, len(pooled))
		model.LogMixProbs(logMixInit(pooled, tc.mixtures), tc.mixtures, q)
		var h, ce float64
		for k, pk := range pooled {
			if pk > 0 {
				h -= pk * math.Log(pk)
				ce -= pk * math.Log(float64(q[k]))
			}
		}
		t.Logf("%d mixtures: cross-entropy %.4f, entropy %.4f", tc.mixtures, ce, h)
		if !(ce-h >= 0 && ce-h <= tc.maxExcess) {
			t.Errorf("%d mixtures: cross-entropy %.4f exceeds the entropy %.4f by %.4f, want 0..%.2f", tc.mixtures, ce, h, ce-h, tc.maxExcess)
		}
	}
}

func TestDistillTargets(t *testing.T) {
	for _, tc := range []struct {
		w, end, f, want float64
	}{{0.8, 0.6, 0, 0.8}, {0.8, 0.6, 0.3, 0.4}, {0.8, 0.6, 0.6, 0}, {0.8, 0.6, 0.9, 0}, {0, 0.6, 0, 0}, {1, 1, 0.5, 0.5}, {0.8, 2, 1, 0.4}, {0.5, 1e9, 1, 0.5 * (1 - 1e-9)}} {
		if got := distillWeight(tc.w, tc.end, tc.f); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("distillWeight(%g, %g, %g) = %g, want %g", tc.w, tc.end, tc.f, got, tc.want)
		}
	}
	// Two windows of 3 classes; the second teacher row is unnormalised,
	// a third is all zeros (the true class alone is kept).
	teacher := []float32{0.5, 0.25, 0.25, 1, 1, 2, 0, 0, 0}
	dst := make([]float32, 9)
	mixTargets(dst, teacher, []int{0, 2, 1}, 0.4, 3)
	want := []float32{0.2 + 0.6, 0.1, 0.1, 0.1, 0.1, 0.2 + 0.6, 0, 1, 0}
	for i := range want {
		if math.Abs(float64(dst[i]-want[i])) > 1e-6 {
			t.Fatalf("mixed targets %v, want %v", dst, want)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	_, err := Run(context.Background(), Options{})
	if err == nil {
		t.Fatal("want an error for empty options")
	}
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:2]
	base := Options{Rec: rec, Cells: cells, Config: tinyConfig(model.HeadCat, 2), Steps: 2, Batch: 4, LR: 1e-3,
		Out: filepath.Join(t.TempDir(), "m.ckpt"), Log: &bytes.Buffer{}}
	teacher := fixedPredictor{}
	for _, tc := range []struct {
		name string
		mod  func(o *Options)
	}{
		{"distill without teacher", func(o *Options) { o.Distill = 0.5 }},
		{"distill weight above 1", func(o *Options) { o.Distill, o.Teacher = 1.5, teacher }},
		{"distill end negative", func(o *Options) { o.Distill, o.DistillEnd, o.Teacher = 0.5, -1, teacher }},
		{"distill end infinite", func(o *Options) { o.Distill, o.DistillEnd, o.Teacher = 0.5, math.Inf(1), teacher }},
		{"distill logmix", func(o *Options) { o.Distill, o.Teacher, o.Config = 0.5, teacher, tinyConfig(model.HeadLogMix, 2) }},
		{"no learning rate", func(o *Options) { o.LR = 0 }},
		{"cells mismatch", func(o *Options) { o.Config = tinyConfig(model.HeadCat, 3) }},
		{"batch too large", func(o *Options) { o.Batch = maxBatch + 1 }},
		{"EMA decay 1", func(o *Options) { o.EMA = 1 }},
		{"EMA decay negative", func(o *Options) { o.EMA = -0.5 }},
		{"EMA decay NaN", func(o *Options) { o.EMA = math.NaN() }},
	} {
		o := base
		tc.mod(&o)
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: want an error", tc.name)
		}
	}
}

// fixedPredictor predicts the uniform distribution for every window.
type fixedPredictor struct{}

func (fixedPredictor) Predict(b *rgc.Batch, out []float32) error {
	for i := range out[:b.Len()*rgc.NumClasses] {
		out[i] = 1.0 / rgc.NumClasses
	}
	return nil
}

// TestStepRate: the steps' own rate leaves the validation time out, and
// is 0 where validation took all of it.
func TestStepRate(t *testing.T) {
	for _, c := range []struct {
		samples, secs, val, want float64
	}{
		{640, 1, 0, 640},
		{640, 1, 0.2, 800},
		{640, 1, 1, 0},
		{0, 1, 0.5, 0},
	} {
		if got := stepRate(c.samples, c.secs, c.val); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("stepRate(%v, %v, %v) = %v, want %v", c.samples, c.secs, c.val, got, c.want)
		}
	}
}

// TestProgressPos: a step-bound run shows its plan, a time-bound one the
// time used of its budget, and no step plan when it has no step cap.
func TestProgressPos(t *testing.T) {
	for _, c := range []struct {
		step, steps     int
		elapsed, budget float64
		want            string
	}{
		{64, 2000, 12.3, 0, "step 64/2000"},
		{64, maxSteps, 90.4, 120, "step 64  1m30s of 2m0s"},
		{64, 500, 30, 3600, "step 64/500  30s of 1h0m0s"},
	} {
		if got := progressPos(c.step, c.steps, c.elapsed, c.budget); got != c.want {
			t.Errorf("progressPos(%d, %d, %v, %v) = %q, want %q", c.step, c.steps, c.elapsed, c.budget, got, c.want)
		}
	}
	for _, c := range []struct {
		steps  int
		budget float64
		want   string
	}{
		{2000, 0, "2000 steps"},
		{maxSteps, 120, "a 2m0s budget"},
		{500, 3600, "a 1h0m0s budget, at most 500 steps"},
	} {
		if got := runPlan(c.steps, c.budget); got != c.want {
			t.Errorf("runPlan(%d, %v) = %q, want %q", c.steps, c.budget, got, c.want)
		}
	}
	for v, want := range map[float64]string{math.Inf(1): "-", 0.93625: "0.9363"} {
		if got := bestVal(v); got != want {
			t.Errorf("bestVal(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestRunReportsValidationTime: a run that validates at every other step
// reports time spent validating, and a rate in steps above the run's (it
// leaves that time out), in its result and in every progress line.
func TestRunReportsValidationTime(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	o := Options{Data: "shipped", Rec: rec, Cells: rec.QualityCells()[:3], Config: tinyConfig(model.HeadCat, 3),
		Steps: 6, Batch: 4, LR: 3e-3, ValEvery: 2, ValWindows: 64, Seed: 3, Threads: 1,
		Out: filepath.Join(t.TempDir(), "m.ckpt"), Log: &log, ProgressEvery: time.Nanosecond}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Validation <= 0 || res.Validation >= res.Elapsed {
		t.Errorf("validation %v of %v: want a positive part", res.Validation, res.Elapsed)
	}
	if res.StepSamplesPerSec <= res.SamplesPerSec {
		t.Errorf("rate in steps %.1f, run's %.1f samples/s: want the steps' rate above", res.StepSamplesPerSec, res.SamplesPerSec)
	}
	lines := 0
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.HasPrefix(l, "step ") && strings.Contains(l, "samples/s") {
			lines++
			if !strings.Contains(l, " in steps, validation ") {
				t.Errorf("progress line without the rate in steps: %q", l)
			}
		}
	}
	if lines != o.Steps {
		t.Errorf("%d progress lines, want %d (one per step)\n%s", lines, o.Steps, log.String())
	}
}

// TestEvaluatorMatchesGraph: validation on the engine gives the mean NLL
// of the training graph's own inference pass (running batch-norm
// statistics) within 1e-5 nats, for both heads, at trained-looking
// weights (random, running statistics away from 0 and 1).
func TestEvaluatorMatchesGraph(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:3]
	for _, head := range []string{model.HeadCat, model.HeadLogMix} {
		t.Run(head, func(t *testing.T) {
			c := tinyConfig(head, len(cells))
			w := model.InitWeights(c, rand.New(rand.NewPCG(5, 6)))
			r := rand.New(rand.NewPCG(7, 8))
			for _, p := range c.Params() { // in order: the same draws every run
				v, name := w.Tensors[p.Name], p.Name
				switch {
				case strings.HasSuffix(name, ".running_mean"):
					for i := range v {
						v[i] = float32(r.NormFloat64() * 0.1)
					}
				case strings.HasSuffix(name, ".running_var"):
					for i := range v {
						v[i] = float32(0.5 + r.Float64())
					}
				}
			}
			val, err := newValSet(rec, rgc.Val, cells, 70, 3) // a last batch of 6
			if err != nil {
				t.Fatal(err)
			}
			const batch = 16
			got, err := newEvaluator(w, val, batch, 2).nll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.New(w, batch, graph.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			probs := make([]float32, c.Classes)
			in, rows := make([]float32, batch*rgc.WindowLen), make([]int, batch)
			var want float64
			n := len(val.targets)
			for lo := 0; lo < n; lo += batch {
				m := min(batch, n-lo)
				for i := range batch {
					j := lo + min(i, m-1)
					copy(in[i*rgc.WindowLen:(i+1)*rgc.WindowLen], val.inputs[j*rgc.WindowLen:(j+1)*rgc.WindowLen])
					rows[i] = val.rows[j]
				}
				if err := g.SetInputs(in, rows, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := g.Run(); err != nil {
					t.Fatal(err)
				}
				k := c.HeadOut()
				for i := range m {
					c.Probs(g.Output()[i*k:(i+1)*k], probs)
					want += model.NLL(probs, val.targets[lo+i])
				}
			}
			want /= float64(n)
			if math.Abs(got-want) > 1e-5 {
				t.Errorf("engine %.7f, graph %.7f: differ by %.2g (want <= 1e-5)", got, want, got-want)
			}
		})
	}
}
