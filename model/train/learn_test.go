package train

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

// TestLearnsSyntheticCells trains a small model on synthetic GLM cells
// (rgc/synth) whose responses are strongly driven by the stimulus and checks
// that it learns them, against references rather than numbers seen in one
// run: on the validation windows one horizon apart (nearly independent
// outcomes), paired per window, the model's NLL is below the zero-input
// model's (ClassFrequencies) by more than zSig standard errors, and not
// below the exact oracle's (synth.Oracle, the Bayes-optimal predictor) by
// more than zSig; distillation from the oracle beats plain training by
// more than zSig standard errors. The step count, not the time, bounds the
// run, so the result does not depend on the machine's speed.
func TestLearnsSyntheticCells(t *testing.T) {
	// zSig is the significance of every comparison: a one-sided z of 3
	// (a chance of about 1 in 700 that noise alone passes it).
	const zSig = 3
	raw, truth, err := synth.Generate(context.Background(), synth.Config{Cells: 8, Minutes: 6, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := raw.Bin()
	if err != nil {
		t.Fatal(err)
	}
	// The two most active cells: the most spikes to learn from.
	cells := []int{0, 1, 2, 3, 4, 5, 6, 7}
	slices.SortFunc(cells, func(a, b int) int { return rec.Cells[b].NumSpikes() - rec.Cells[a].NumSpikes() })
	cells = cells[:2]
	t.Logf("cells %v: %.1f and %.1f Hz", cells, rec.RateHz(cells[0]), rec.RateHz(cells[1]))
	cfg := model.Config{
		Stem: model.StemGPTA, Head: model.HeadCat, NumCells: 2,
		InRows: 5, InBins: 1024, StemCh: 4, StemKernel: 11,
		BlockMid: 8, BlockOut: 8, BlockKernel: 5, SEReduction: 2,
		Layers: 1, Heads: 2, HeadDim: 4, Mixtures: 3, Classes: 81,
	}
	oracle, err := synth.NewOracle(raw, truth)
	if err != nil {
		t.Fatal(err)
	}
	run := func(teacher rgc.Predictor) (*Result, string, string) {
		t.Helper()
		var log bytes.Buffer
		o := Options{Data: "synth", Rec: rec, Cells: cells, Config: cfg,
			Steps: 600, Batch: 32, LR: 3e-3, ValEvery: 100, ValWindows: 512, Seed: 1, Threads: 2,
			Out: filepath.Join(t.TempDir(), "m.ckpt"), Log: &log}
		if teacher != nil {
			o.Teacher, o.Distill = teacher, 0.8
		}
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return res, o.Out, log.String()
	}

	// The validation windows of the comparisons, and each reference's NLL
	// on them.
	first, last, _ := rec.WindowRange(rgc.Val)
	var refs []rgc.WindowRef
	for i, c := range cells {
		for w := first + i*rgc.Horizon/len(cells); w <= last; w += rgc.Horizon {
			refs = append(refs, rgc.WindowRef{Cell: c, T: w})
		}
	}
	batch, targets := &rgc.Batch{}, make([]int, len(refs))
	rec.FillBatch(refs, batch, targets)
	_, perCell := ClassFrequencies(rec, rgc.Train, cells)
	zero := make([]float64, len(refs))
	for i, r := range refs {
		zero[i] = -math.Log(perCell[slices.Index(cells, r.Cell)][targets[i]])
	}
	bayes := windowNLLs(t, oracle, batch, targets)
	nllOf := func(path string) []float64 {
		t.Helper()
		ck, err := model.LoadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(ck, 64, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return windowNLLs(t, e, batch, targets)
	}
	// beats reports whether a's NLL is below b's by more than zSig
	// standard errors of the paired difference.
	beats := func(what string, a, b []float64) bool {
		d := make([]float64, len(a))
		for i := range a {
			d[i] = b[i] - a[i]
		}
		mean, sd := stat.MeanStdDev(d, nil)
		se := sd / math.Sqrt(float64(len(d)))
		t.Logf("%s: %.4f nats better (SE %.4f, z %.1f) on %d windows", what, mean, se, mean/se, len(d))
		return mean > zSig*se
	}

	res, out, log := run(nil)
	plain := nllOf(out)
	t.Logf("best val NLL %.4f at step %d; zero-input %.4f per cell\n%s", res.BestVal, res.BestStep, res.ZeroPerCel, log)
	if !beats("plain over zero-input", plain, zero) {
		t.Error("the model does not beat the zero-input model beyond noise: it has not learned the stimulus")
	}
	if beats("plain over the oracle", plain, bayes) {
		t.Error("the model beats the Bayes-optimal oracle beyond noise: the evaluation is wrong")
	}

	// Distillation (the exact oracle as teacher, its share falling from 0.8
	// to 0 at 60% of the run) must learn faster: lower gradient noise than
	// one-hot targets of rare spikes.
	dres, dout, dlog := run(oracle)
	t.Logf("distilled: best val NLL %.4f at step %d\n%s", dres.BestVal, dres.BestStep, dlog)
	if !beats("distilled over plain", nllOf(dout), plain) {
		t.Error("distillation from the oracle does not beat plain training beyond noise")
	}
}

// windowNLLs returns the NLL of each window's recorded class under p.
func windowNLLs(t *testing.T, p rgc.Predictor, b *rgc.Batch, targets []int) []float64 {
	t.Helper()
	out := make([]float32, b.Len()*rgc.NumClasses)
	if err := p.Predict(b, out); err != nil {
		t.Fatal(err)
	}
	nll := make([]float64, b.Len())
	for i, k := range targets {
		nll[i] = -math.Log(float64(out[i*rgc.NumClasses+k]))
	}
	return nll
}
