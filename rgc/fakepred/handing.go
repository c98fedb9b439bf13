package fakepred

import "rgcpred/rgc"

// Handing wraps a predictor as one that hands a call's windows over as it
// computes them (rgc.Progressive): it computes the batch with P, then
// reports its windows Step at a time (Step 0: one at a time), leaving the
// last part to its return unless Last is set, and fails with Err once
// FailAt windows are handed over (FailAt > 0).
type Handing struct {
	P      rgc.Predictor
	Step   int
	Last   bool
	FailAt int
	Err    error
}

// Predict implements rgc.Predictor.
func (h *Handing) Predict(b *rgc.Batch, out []float32) error { return h.P.Predict(b, out) }

// PredictEach implements rgc.Progressive.
func (h *Handing) PredictEach(b *rgc.Batch, out []float32, done func(n int)) error {
	if err := h.P.Predict(b, out); err != nil {
		return err
	}
	step := max(h.Step, 1)
	for k := step; k < b.Len(); k += step {
		done(k)
		if h.FailAt > 0 && k >= h.FailAt {
			return h.Err
		}
	}
	if h.Last && b.Len() > 0 {
		done(b.Len())
	}
	return nil
}
