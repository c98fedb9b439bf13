package modelload

import (
	"math"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/serve/service"
)

// TestEnsemble serves the shipped checkpoint averaged with a random one of
// the same cells and checks, on windows of the shipped recording, that the
// served probabilities are the members' mean, that the name lists both,
// and that closing closes both.
func TestEnsemble(t *testing.T) {
	rec, err := rgc.Load(shippedData)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := model.LoadCheckpoint(shippedCkpt)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := checkpoint(t, ck.CellIDs, 1)
	m, err := Ensemble(Engine(1, engine.FP32), []string{other})(shippedCkpt, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Name, "ensemble of 2, probabilities averaged: gpt-a-cat-cpu (data data/chicken-17-08-21") ||
		!strings.Contains(m.Name, "; gpt-a-cat-cpu (data random") {
		t.Errorf("name %q does not list both members", m.Name)
	}
	if len(m.Cells) != len(ck.CellIDs) || m.StimMode != rgc.StimCausal || engine.ArithmeticOf(m.Predictor) != "fp32" {
		t.Errorf("%d cells, stimulus %s, arithmetic %s", len(m.Cells), m.StimMode, engine.ArithmeticOf(m.Predictor))
	}
	b := qualityWindows(rec, 650_000, 733)
	got := make([]float32, b.Len()*rgc.NumClasses)
	if err := m.Predictor.Predict(b, got); err != nil {
		t.Fatal(err)
	}
	sum := make([]float64, len(got))
	for _, p := range []string{shippedCkpt, other} {
		one, err := Engine(1, engine.FP32)(p, 8)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(got))
		if err := one.Predictor.Predict(b, out); err != nil {
			t.Fatal(err)
		}
		one.Close()
		for i, v := range out {
			sum[i] += float64(v) / 2
		}
	}
	for i := range got {
		if math.Abs(float64(got[i])-sum[i]) > 1e-6 {
			t.Fatalf("probability %d: %v, want the members' mean %v", i, got[i], sum[i])
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEnsembleErrors: no second checkpoint, a member lacking cells, one on
// another stimulus mode, and a missing file are refused, naming the cause.
func TestEnsembleErrors(t *testing.T) {
	ck, err := model.LoadCheckpoint(shippedCkpt)
	if err != nil {
		t.Fatal(err)
	}
	fewer, _ := checkpoint(t, ck.CellIDs[:10], 1)
	same, _ := checkpoint(t, ck.CellIDs, 1)
	zeroPhase := func(path string, n int) (*service.Model, error) {
		m, err := Engine(1, engine.FP32)(path, n)
		if err == nil && path == same {
			m.StimMode = rgc.StimZeroPhase
		}
		return m, err
	}
	for _, tc := range []struct {
		name   string
		load   service.Loader
		others []string
		want   string
	}{
		{"alone", Engine(1, engine.FP32), nil, "no checkpoint besides the model"},
		{"fewer cells", Engine(1, engine.FP32), []string{fewer}, "does not know cells"},
		{"other stimulus", zeroPhase, []string{same}, "reads zero-phase bins, the first model causal"},
		{"missing file", Engine(1, engine.FP32), []string{"/nonexistent/x.ckpt"}, "/nonexistent/x.ckpt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Ensemble(tc.load, tc.others)(shippedCkpt, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
