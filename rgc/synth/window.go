package synth

import (
	"fmt"
	"math"
	"slices"

	"rgcpred/rgc"
)

// NewWindowOracle builds the predictor of a truth that reads everything
// from the windows it is given, as a deployed model must: no recording, and
// b.Ends are ignored. The windows must hold causal bins (rgc.StimCausal):
// each LED's on-fraction over the bin's sensor samples. A value outside
// [0, 1] is an error; windows binned in another mode are not recognised
// as such, so callers check the mode.
//
// Decoding. A bin where every LED reads 0 or 1 shows one frame. A bin
// where a frame switch fell shows the LEDs that changed at a fraction,
// the new frame's share of the bin; the bin belongs to the new frame when
// that share exceeds one half, to the old one otherwise (the rounding of
// AlignFrames in rgc/glm, and the frames the GLM is fitted on). So the
// frames of a window, their patterns and starts, are the aligned frames
// of the recording, except that a switch to the same pattern leaves no
// trace in the bins.
//
// Hidden switches. Such a switch changes no drive (the drive depends on
// the LED states only) but it does change how long the current frame has
// lasted, which sets when the next one may start. So the start of the
// current frame is marginalised: after the last visible switch, at bin e,
// frames follow each other with lengths drawn from the truth's
// distribution and each repeats its pattern with probability 1/16 (the
// stimulus model the oracle enumerates), and the current frame started x
// bins after e with posterior weight
//
//	g(x) P(L >= t+1-e-x),   g(0) = 1,  g(x) = sum_L g(x-L) P(L) / 16,
//
// g(x) being the probability that hidden switches fall exactly x bins
// after e. Where the last visible switch lies outside the window, or the
// run since it is longer than any sequence of frame lengths allows, the
// current frame's age takes the stationary distribution, proportional to
// P(L >= age). The probabilities then equal NewOracle's on the aligned
// recording wherever no hidden switch fell in the current frame's run.
func NewWindowOracle(tr *Truth) (*Oracle, error) {
	if err := tr.Validate(); err != nil {
		return nil, fmt.Errorf("synth window oracle: %w", err)
	}
	o, err := newTables(tr)
	if err != nil {
		return nil, fmt.Errorf("synth window oracle: %w", err)
	}
	o.win = &windowScratch{}
	return o, nil
}

// windowScratch is a window oracle's per-window state.
type windowScratch struct {
	fr    frames
	g     []float64              // g(x) of the current run
	ages  []float64              // posterior weight of each start offset x
	state [rgc.StimChannels]bool // each LED's state at the end of the last bin read
}

// bitTolerance is how far a decoded LED value may sit from 0 or 1 and
// still read as whole.
const bitTolerance = 1e-3

// decodeWindow reads the aligned frames of a window's stimulus rows into
// w.fr (bins 0..WindowBins-1, the window's last bin WindowBins-1). Any
// on-fraction in [0, 1] is read: where the LEDs that changed in a bin
// disagree on the new frame's share (no single switch gives that), the
// largest share decides, so a device's odd bin costs accuracy, not the
// decision. In the first bin an LED's earlier state is unknown; it is
// taken as the one it is moving away from if it reads below one half.
// That bin lies beyond every filter, so the guess changes no probability.
func (w *windowScratch) decodeWindow(win []float32) error {
	fr := &w.fr
	fr.start, fr.pat = fr.start[:0], fr.pat[:0]
	prev := -1 // pattern of the previous bin's frame
	for j := 0; j < rgc.WindowBins; j++ {
		var whole, newOn, oldOn uint8
		share := -1.0
		for c := 0; c < rgc.StimChannels; c++ {
			v := float64(win[c*rgc.WindowBins+j])
			switch {
			case math.IsNaN(v) || v < -bitTolerance || v > 1+bitTolerance:
				return fmt.Errorf("LED %d reads %g at bin %d of the window: not an on-fraction (the GLM on windows needs causal bins)", c, v, j)
			case v >= 1-bitTolerance:
				whole |= 1 << c
				w.state[c] = true
			case v <= bitTolerance:
				w.state[c] = false
			default:
				old := w.state[c]
				if j == 0 {
					old = v < 0.5
				}
				s := v // the new state's share of the bin
				if old {
					s = 1 - v
					oldOn |= 1 << c
				} else {
					newOn |= 1 << c
				}
				share = max(share, s)
				w.state[c] = !old
			}
		}
		p := int(whole | oldOn)
		if share > 0.5 {
			p = int(whole | newOn)
		}
		if p != prev {
			fr.start = append(fr.start, j)
			fr.pat = append(fr.pat, uint8(p))
			prev = p
		}
	}
	fr.start = append(fr.start, rgc.WindowBins)
	return nil
}

// ageWeights fills w.ages with the posterior weight of the current frame
// starting x bins after the last visible switch e (x = 0..t-e) and returns
// whether the run is explained by the frame lengths; visible says whether
// the switch at e lies inside the window.
func (o *Oracle) ageWeights(e, t int, visible bool) bool {
	w := o.win
	r := t - e + 1 // bins of the current run
	w.ages = slices.Grow(w.ages[:0], r)[:r]
	clear(w.ages)
	if visible {
		w.g = slices.Grow(w.g[:0], r)[:r]
		clear(w.g)
		w.g[0] = 1
		sum := 0.0
		for x := 0; x < r; x++ {
			if x > 0 {
				for _, l := range o.lengths {
					if l.Bins > x {
						break
					}
					w.g[x] += w.g[x-l.Bins] * l.Prob / numPatterns
				}
			}
			if a := r - x; a < len(o.tail) {
				w.ages[x] = w.g[x] * o.tail[a]
				sum += w.ages[x]
			}
		}
		if sum > 0 {
			for x := range w.ages {
				w.ages[x] /= sum
			}
			return true
		}
	}
	// Stationary age: P(age = a) proportional to P(L >= a), a <= r.
	sum := 0.0
	for x := range w.ages {
		if a := r - x; a < len(o.tail) {
			w.ages[x] = o.tail[a]
			sum += w.ages[x]
		}
	}
	for x := range w.ages {
		w.ages[x] /= sum
	}
	return visible
}

// minAgeWeight is the posterior weight below which a start of the current
// frame is not enumerated (its futures change no probability by more).
const minAgeWeight = 1e-9

// predictWindow writes o.probs for cell index ci from one window alone.
func (o *Oracle) predictWindow(ci int, win []float32) error {
	w := o.win
	if err := w.decodeWindow(win); err != nil {
		return err
	}
	m := o.cells[ci]
	t := rgc.WindowBins - 1
	row := win[rgc.SpikeRow*rgc.WindowBins:][:rgc.WindowBins]
	o.spk = o.spk[:0]
	for j := max(0, rgc.WindowBins-len(m.hist)); j < rgc.WindowBins; j++ {
		if row[j] > 0.5 {
			o.spk = append(o.spk, int32(j))
		}
	}
	fr := &w.fr
	f := len(fr.pat) - 1
	e := fr.start[f]
	o.ageWeights(e, t, f > 0)
	o.baseIntensity(m, fr, f, t, o.spk)
	for k := range o.probs {
		o.probs[k] = 0
	}
	for x, wt := range w.ages {
		if wt < minAgeWeight {
			continue
		}
		o.node(m, t, 0, 0, 1, wt, e+x, int(fr.pat[f]), t-e-x+1)
	}
	// The pruned weights leave the sum short by at most their total;
	// renormalise so the distribution sums to 1.
	sum := 0.0
	for _, p := range o.probs {
		sum += p
	}
	for k := range o.probs {
		o.probs[k] /= sum
	}
	return nil
}
