package modelload

import (
	"math"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
)

// TestOracle serves a synthetic recording's oracle: every cell, the load
// probe's stimulus-free window answered "no spike", and a recorded window
// answered by the oracle with a distribution.
func TestOracle(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 2, Minutes: 1, Seed: 3})
	m, err := Oracle(dir, rgc.StimCausal)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rgc.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Cells) != len(rec.Cells) || m.StimMode != rgc.StimCausal {
		t.Fatalf("cells %v, mode %v; want the recording's %d cells, causal", m.Cells, m.StimMode, len(rec.Cells))
	}
	probe := make([]float32, rgc.WindowLen)
	end := rgc.WindowBins + 500
	real := make([]float32, rgc.WindowLen)
	rec.Window(0, end, real)
	two := append(append([]float32{}, probe...), probe...)
	for _, tc := range []struct {
		name     string
		inputs   []float32
		noSpike1 bool // the answer is "no spike" with certainty
		err      bool
	}{
		{"probe window", probe, true, false},
		{"two windows without stimulus", two, false, true},
		{"recorded window", real, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.inputs) / rgc.WindowLen
			b := &rgc.Batch{Inputs: tc.inputs, Cells: make([]int, n), Ends: make([]int, n)}
			for i := range n {
				b.Cells[i], b.Ends[i] = m.Cells[0], end
			}
			out := make([]float32, n*rgc.NumClasses)
			err := m.Predictor.Predict(b, out)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want one: %v", err, tc.err)
			}
			if tc.err {
				return
			}
			sum := 0.0
			for _, p := range out[:rgc.NumClasses] {
				sum += float64(p)
			}
			if math.Abs(sum-1) > 1e-4 {
				t.Errorf("probabilities sum to %.6f", sum)
			}
			if got := out[rgc.NoSpikeClass] == 1; got != tc.noSpike1 {
				t.Errorf("P(no spike) = %.4f; want certainty: %v", out[rgc.NoSpikeClass], tc.noSpike1)
			}
		})
	}
}
