package glm

import (
	"testing"

	"rgcpred/rgc"
)

// TestPredictorIsCausal shows that the GLM uses nothing after a window's
// end: on the real recording binned causally, every frame after the end
// of bin t is changed (the frame covering t is cut at the bin's end and
// every later frame's LEDs are inverted), and the windows ending at t and
// the GLM's predictions for them must stay exactly the same. The
// predictions for windows a few bins later must change, so the test does
// change what the model reads.
func TestPredictorIsCausal(t *testing.T) {
	rec, cells, ids, tr := realGLM(t)
	p, err := NewPredictor(rec, tr)
	if err != nil {
		t.Fatal(err)
	}
	raw := rec.Raw
	// Window ends inside frames, at least a bin from either edge, so that
	// cutting the frame at the bin's end leaves two frames of a bin or more.
	var ends []int
	for f := 500; len(ends) < 4; f += 4001 {
		s, e := raw.Triggers[f], raw.Triggers[f+1]
		tEnd := int((s+e)/2/rgc.Decimation) - 1
		if cut := int64(tEnd+1) * rgc.Decimation; cut-s >= rgc.Decimation && e-cut >= rgc.Decimation {
			ends = append(ends, tEnd)
		}
	}
	predict := func(p *Predictor, r *rgc.Recording, tEnd int) ([]float32, []float32) {
		n := len(cells)
		b := &rgc.Batch{Inputs: make([]float32, n*rgc.WindowLen), Cells: ids, Ends: make([]int, n)}
		for j, c := range cells {
			win := b.Inputs[j*rgc.WindowLen : (j+1)*rgc.WindowLen]
			r.StimulusWindow(tEnd, win)
			rgc.FillSpikeRow(win, r.Cells[c].SpikeBins, tEnd)
			b.Ends[j] = tEnd
		}
		out := make([]float32, n*rgc.NumClasses)
		if err := p.Predict(b, out); err != nil {
			t.Fatal(err)
		}
		return b.Inputs, out
	}
	for _, tEnd := range ends {
		cut := int64(tEnd+1) * rgc.Decimation
		alt := *raw
		alt.Pattern, alt.Triggers = nil, nil
		for f := range raw.Pattern {
			s, e := raw.Triggers[f], raw.Triggers[f+1]
			inv := raw.Pattern[f]
			for c := range inv {
				inv[c] = 1 - inv[c]
			}
			switch {
			case e <= cut:
				alt.Pattern, alt.Triggers = append(alt.Pattern, raw.Pattern[f]), append(alt.Triggers, s)
			case s < cut:
				alt.Pattern, alt.Triggers = append(alt.Pattern, raw.Pattern[f], inv), append(alt.Triggers, s, cut)
			default:
				alt.Pattern, alt.Triggers = append(alt.Pattern, inv), append(alt.Triggers, s)
			}
		}
		alt.Triggers = append(alt.Triggers, raw.Triggers[len(raw.Triggers)-1])
		rec2, err := alt.Bin()
		if err != nil {
			t.Fatal(err)
		}
		p2, err := NewPredictor(rec2, tr)
		if err != nil {
			t.Fatal(err)
		}
		in1, out1 := predict(p, rec, tEnd)
		in2, out2 := predict(p2, rec2, tEnd)
		for i := range in1 {
			if in1[i] != in2[i] {
				t.Fatalf("end %d: window float %d differs (%g, %g) though only samples after the window's end changed", tEnd, i, in1[i], in2[i])
			}
		}
		for i := range out1 {
			if out1[i] != out2[i] {
				t.Fatalf("end %d: GLM probability %d differs (%g, %g) though only samples after the window's end changed", tEnd, i, out1[i], out2[i])
			}
		}
		// 50 bins later the changed frames lie inside the window and the
		// 36-bin latency: the predictions must differ.
		_, later1 := predict(p, rec, tEnd+50)
		_, later2 := predict(p2, rec2, tEnd+50)
		same := true
		for i := range later1 {
			same = same && later1[i] == later2[i]
		}
		if same {
			t.Errorf("end %d: predictions 50 bins later did not change either; the test changes nothing the GLM reads", tEnd)
		}
	}
}
