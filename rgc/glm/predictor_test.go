package glm

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

// handTruth builds a GLM for the given cells of rec from basis weights, as
// Fit would: an ON-like cell and an OFF-like cell with refractory history.
func handTruth(t *testing.T, rec *rgc.Recording, ids []int) *synth.Truth {
	t.Helper()
	opts := DefaultOptions()
	sb, hb, err := opts.bases()
	if err != nil {
		t.Fatal(err)
	}
	fr, err := AlignFrames(rec.Raw)
	if err != nil {
		t.Fatal(err)
	}
	tr := &synth.Truth{BinRateHz: rgc.BinRateHz}
	lens, probs := fr.FrameLengths()
	for i, l := range lens {
		tr.FrameLengths = append(tr.FrameLengths, synth.FrameLength{Bins: l, Prob: probs[i]})
	}
	for k, id := range ids {
		sign := 1 - 2*float64(k%2)
		w := make([]float64, len(sb.Rows))
		w[1], w[2], w[4] = 0.2*sign, 0.1*sign, -0.05*sign
		wh := make([]float64, len(hb.Rows))
		wh[0], wh[3] = -6, 0.5
		c := synth.CellParams{ClusterID: id, Type: "glm", Bias: -6, HistFilter: hb.Filter(wh)[1:]}
		for ch := range c.StimFilter {
			c.StimFilter[ch] = sb.Filter(w)
		}
		tr.Cells = append(tr.Cells, c)
	}
	return tr
}

// realGLM loads the shipped recording (causal bins) and builds handTruth
// for two of its quality cells (indices into rec.Cells, and cluster ids).
func realGLM(t *testing.T) (rec *rgc.Recording, cells, ids []int, tr *synth.Truth) {
	t.Helper()
	rec, err := rgc.Load("../../data/chicken-17-08-21")
	if err != nil {
		t.Fatal(err)
	}
	q := rec.QualityCells()
	cells = []int{q[0], q[7]}
	ids = []int{rec.Cells[cells[0]].ClusterID, rec.Cells[cells[1]].ClusterID}
	return rec, cells, ids, handTruth(t, rec, ids)
}

// TestPredictorReal evaluates a GLM on windows of the real recording: the
// predictions must be the oracle's for the cell's spike history, sum to 1,
// allocate nothing after warm-up, and a window whose stimulus is not the
// recording's at its end bin must be refused.
func TestPredictorReal(t *testing.T) {
	rec, cells, ids, tr := realGLM(t)
	path := filepath.Join(t.TempDir(), "glm.json")
	if err := SaveTruth(path, tr); err != nil {
		t.Fatal(err)
	}
	tr2, err := LoadTruth(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(rec, tr2)
	if err != nil {
		t.Fatal(err)
	}
	// Windows at ends spread over the recording, including ends right at
	// and just after frame switches (where the real and aligned binned
	// stimuli differ most).
	fr, _ := AlignFrames(rec.Raw)
	ends := []int{1023, 5000, fr.Start[300], fr.Start[300] + 1, fr.Start[9001] - 1, 400000, rec.Bins - 1}
	n := len(ends) * len(cells)
	b := &rgc.Batch{Inputs: make([]float32, n*rgc.WindowLen), Cells: make([]int, n), Ends: make([]int, n)}
	for i, tEnd := range ends {
		for j, c := range cells {
			k := i*len(cells) + j
			win := b.Inputs[k*rgc.WindowLen : (k+1)*rgc.WindowLen]
			rec.StimulusWindow(tEnd, win)
			rgc.FillSpikeRow(win, rec.Cells[c].SpikeBins, tEnd)
			b.Cells[k], b.Ends[k] = ids[j], tEnd
		}
	}
	out := make([]float32, n*rgc.NumClasses)
	if err := p.Predict(b, out); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, rgc.NumClasses)
	for k := 0; k < n; k++ {
		j := k % len(cells)
		if err := p.Oracle().Probs(j, b.Ends[k], rec.Cells[cells[j]].SpikeBins, want); err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for c, v := range out[k*rgc.NumClasses : (k+1)*rgc.NumClasses] {
			sum += float64(v)
			if math.Abs(float64(v)-want[c]) > 1e-6 {
				t.Fatalf("window %d (end %d, cluster %d) class %d: %g, oracle %g", k, b.Ends[k], b.Cells[k], c, v, want[c])
			}
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("window %d: probabilities sum to %g", k, sum)
		}
	}
	if a := testing.AllocsPerRun(5, func() {
		if err := p.Predict(b, out); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Predict allocates %g times per call after warm-up", a)
	}

	// A window whose stimulus comes from elsewhere is refused.
	bad := &rgc.Batch{Inputs: make([]float32, rgc.WindowLen), Cells: []int{ids[0]}, Ends: []int{fr.Start[300] + 3}}
	rec.StimulusWindow(fr.Start[300]-30, bad.Inputs)
	for c := 0; c < rgc.StimChannels; c++ {
		bad.Inputs[c*rgc.WindowBins+rgc.WindowBins-1] = 1 - rec.Stimulus[c][bad.Ends[0]]
	}
	if err := p.Predict(bad, out); err == nil || !strings.Contains(err.Error(), "does not come from this recording") {
		t.Errorf("mismatched window: err = %v", err)
	}
	bad.Ends[0] = rec.Bins
	if err := p.Predict(bad, out); err == nil || !strings.Contains(err.Error(), "outside the recording") {
		t.Errorf("end past the recording: err = %v", err)
	}
	bad.Cells[0], bad.Ends[0] = 99999, 5000
	rec.StimulusWindow(5000, bad.Inputs)
	if err := p.Predict(bad, out); err == nil || !strings.Contains(err.Error(), "unknown cell") {
		t.Errorf("unknown cell: err = %v", err)
	}
	// A truth naming a cell the recording lacks.
	tr2.Cells[1].ClusterID = -5
	if _, err := NewPredictor(rec, tr2); err == nil || !strings.Contains(err.Error(), "cluster id -5") {
		t.Errorf("unknown truth cell: err = %v", err)
	}
}
