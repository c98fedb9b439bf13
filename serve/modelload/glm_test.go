package modelload

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/serve/service"
)

const (
	shippedCkpt = "../../models/gpt-a-cat-cpu.ckpt"
	shippedGLM  = "../../models/glm-chicken-17-08-21.json"
	shippedData = "../../data/chicken-17-08-21"
)

// qualityWindows returns a batch of windows of rec, one for each of its
// first 8 quality cells, the i-th ending at bin t0 + i*step.
func qualityWindows(rec *rgc.Recording, t0, step int) *rgc.Batch {
	var refs []rgc.WindowRef
	for i, c := range rec.QualityCells()[:8] {
		refs = append(refs, rgc.WindowRef{Cell: c, T: t0 + step*i})
	}
	b := &rgc.Batch{}
	rec.FillBatch(refs, b, make([]int, len(refs)))
	return b
}

// TestWithGLM serves the shipped checkpoint mixed with the shipped GLM and
// checks, on windows of the shipped recording, that the served
// probabilities are (1-w) the engine's plus w the GLM's on the windows
// alone; that the name says so; and that the engine's arithmetic shows
// through.
func TestWithGLM(t *testing.T) {
	rec, err := rgc.Load(shippedData)
	if err != nil {
		t.Fatal(err)
	}
	const w = 0.35
	m, err := WithGLM(Engine(1, engine.FP32), shippedGLM, w)(shippedCkpt, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(m.Name, "mixed with the GLM "+shippedGLM+" at weight 0.35") {
		t.Errorf("name %q does not say it mixes in the GLM", m.Name)
	}
	if got := engine.ArithmeticOf(m.Predictor); got != "fp32" {
		t.Errorf("arithmetic %q, want the engine's fp32", got)
	}
	if _, ok := m.Predictor.(rgc.Expecter); !ok {
		t.Error("the mixture hides the engine's Expect")
	}
	b := qualityWindows(rec, 700_000, 911)
	got := make([]float32, b.Len()*rgc.NumClasses)
	if err := m.Predictor.Predict(b, got); err != nil {
		t.Fatal(err)
	}
	base, err := Engine(1, engine.FP32)(shippedCkpt, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	tr, err := glm.LoadTruth(shippedGLM)
	if err != nil {
		t.Fatal(err)
	}
	gp, err := glm.NewWindowPredictor(tr)
	if err != nil {
		t.Fatal(err)
	}
	pn, pg := make([]float32, len(got)), make([]float32, len(got))
	if err := base.Predictor.Predict(b, pn); err != nil {
		t.Fatal(err)
	}
	if err := gp.Predict(b, pg); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		want := (1-w)*float64(pn[i]) + w*float64(pg[i])
		if math.Abs(float64(got[i])-want) > 1e-6 {
			t.Fatalf("probability %d: %v, want %v", i, got[i], want)
		}
	}
}

// TestWithGLMErrors: a weight outside (0, 1), a GLM lacking a served cell,
// a model reading zero-phase bins and a missing GLM file are refused with
// errors saying which, and the model under them is closed.
func TestWithGLMErrors(t *testing.T) {
	ids := []int{900001, 900002, 900003} // not cells of the shipped GLM
	unknown, _ := checkpoint(t, ids, 1)
	zeroPhase := func(string, int) (*service.Model, error) {
		m, err := Engine(1, engine.FP32)(shippedCkpt, 0)
		if err == nil {
			m.StimMode = rgc.StimZeroPhase
		}
		return m, err
	}
	for _, tc := range []struct {
		name   string
		load   service.Loader
		path   string
		glm    string
		weight float64
		want   string
	}{
		{"weight 0", Engine(1, engine.FP32), shippedCkpt, shippedGLM, 0, "weight 0"},
		{"weight 1", Engine(1, engine.FP32), shippedCkpt, shippedGLM, 1, "weight 1"},
		{"unknown cells", Engine(1, engine.FP32), unknown, shippedGLM, 0.3, "has no model of cells [900001 900002 900003]"},
		{"zero-phase model", zeroPhase, shippedCkpt, shippedGLM, 0.3, "the model reads zero-phase"},
		{"missing GLM", Engine(1, engine.FP32), shippedCkpt, filepath.Join(t.TempDir(), "none.json"), 0.3, "none.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WithGLM(tc.load, tc.glm, tc.weight)(tc.path, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
