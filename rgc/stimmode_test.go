package rgc

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// randomFrames returns frames of random patterns and lengths (30-1430
// sensor samples) starting at sample 700.
func randomFrames(rng *rand.Rand, frames int) ([][StimChannels]int8, []int64) {
	pattern := make([][StimChannels]int8, frames)
	triggers := []int64{700}
	for f := range pattern {
		for c := range pattern[f] {
			pattern[f][c] = int8(rng.IntN(2))
		}
		triggers = append(triggers, triggers[f]+int64(30+rng.IntN(1400)))
	}
	return pattern, triggers
}

// stepFunction returns the LEDs' step functions at the sensor rate.
func stepFunction(pattern [][StimChannels]int8, triggers []int64, numSamples int64) [][StimChannels]float64 {
	x := make([][StimChannels]float64, numSamples)
	for f := range pattern {
		for n := triggers[f]; n < triggers[f+1] && n < numSamples; n++ {
			for c := range x[n] {
				x[n][c] = float64(pattern[f][c])
			}
		}
	}
	return x
}

// TestBinStimulusCausalIsOnFraction checks causal bins against the mean of
// the step function over each bin's own 18 samples, exactly (float32 of a
// count over 18).
func TestBinStimulusCausalIsOnFraction(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pattern, triggers := randomFrames(rng, 40)
	numSamples := triggers[len(triggers)-1] + 1000
	got := BinStimulus(StimCausal, pattern, triggers, numSamples)
	x := stepFunction(pattern, triggers, numSamples)
	for c := 0; c < StimChannels; c++ {
		if len(got[c]) != int(numSamples/Decimation) {
			t.Fatalf("channel %d has %d bins, want %d", c, len(got[c]), numSamples/Decimation)
		}
		for b := range got[c] {
			n := 0.0
			for s := b * Decimation; s < (b+1)*Decimation; s++ {
				n += x[s][c]
			}
			if want := float32(n) / Decimation; got[c][b] != want {
				t.Fatalf("channel %d bin %d: %g, want %g (%g of 18 samples on)", c, b, got[c][b], want, n)
			}
		}
	}
}

// TestBinStimulusCausalIgnoresTheFuture changes every sensor sample after a
// bin's end (the frames from there on get new patterns and new trigger
// times) and checks that no bin up to it changes in causal mode, while
// zero-phase bins up to 16 bins before it do.
func TestBinStimulusCausalIgnoresTheFuture(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pattern, triggers := randomFrames(rng, 60)
	numSamples := triggers[len(triggers)-1] + 1000
	for _, end := range []int{200, 377, 901, 1500} { // the last bin kept
		cut := int64(end+1) * Decimation // first sample after bin end
		// The future: frames from cut on are redrawn.
		var p2 [][StimChannels]int8
		var t2 []int64
		for f := range pattern {
			if triggers[f] >= cut {
				break
			}
			p2 = append(p2, pattern[f])
			t2 = append(t2, triggers[f])
		}
		// The frame covering cut is cut there, and new frames follow.
		t2 = append(t2, cut)
		for t2[len(t2)-1] < numSamples {
			var p [StimChannels]int8
			for c := range p {
				p[c] = int8(rng.IntN(2))
			}
			p2 = append(p2, p)
			t2 = append(t2, t2[len(t2)-1]+int64(1+rng.IntN(400)))
		}
		for _, tc := range []struct {
			mode    StimMode
			changes bool // whether some bin up to end must change
		}{{StimCausal, false}, {StimZeroPhase, true}} {
			a := BinStimulus(tc.mode, pattern, triggers, numSamples)
			b := BinStimulus(tc.mode, p2, t2, numSamples)
			changed := false
			for c := range a {
				for k := 0; k <= end; k++ {
					if a[c][k] != b[c][k] {
						changed = true
						if !tc.changes {
							t.Fatalf("%s: bin %d of LED %d changed (%g -> %g) when only samples after bin %d's end changed", tc.mode, k, c, a[c][k], b[c][k], end)
						}
					}
				}
			}
			if tc.changes && !changed {
				t.Errorf("%s: no bin up to %d changed; the test does not change the future", tc.mode, end)
			}
		}
	}
}

func TestStimModeNamesAndCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode StimMode
		ok   bool
	}{{"causal", StimCausal, true}, {"zero-phase", StimZeroPhase, true}, {"zerophase", 0, false}, {"", 0, false}} {
		m, err := ParseStimMode(tc.name)
		if (err == nil) != tc.ok || (tc.ok && m != tc.mode) {
			t.Errorf("ParseStimMode(%q) = %v, %v", tc.name, m, err)
		}
		if tc.ok && m.String() != tc.name {
			t.Errorf("%v.String() = %q, want %q", m, m.String(), tc.name)
		}
	}
	if StimMode(0) != StimCausal {
		t.Error("the zero StimMode is not causal, the default")
	}
	if _, err := StimMode(7).MarshalText(); err == nil {
		t.Error("an unknown mode marshals")
	}
	for _, tc := range []struct{ model, input StimMode }{{StimZeroPhase, StimCausal}, {StimCausal, StimZeroPhase}} {
		err := CheckStimMode(tc.model, tc.input)
		if err == nil || !strings.Contains(err.Error(), "trained on "+tc.model.String()) || !strings.Contains(err.Error(), "input is "+tc.input.String()) {
			t.Errorf("CheckStimMode(%v, %v) = %v, want an error naming both", tc.model, tc.input, err)
		}
		if err := CheckStimMode(tc.model, tc.model); err != nil {
			t.Errorf("CheckStimMode(%v, %v) = %v", tc.model, tc.model, err)
		}
	}
}

// TestLoadModes checks that Load bins causally by default and LoadMode in
// the mode asked for, on the shipped recording.
func TestLoadModes(t *testing.T) {
	for _, tc := range []struct {
		mode     StimMode
		min, max float32
	}{{StimCausal, 0, 1}, {StimZeroPhase, -0.0895, 1.0895}} {
		rec, err := LoadMode(shippedDir, tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if rec.StimMode != tc.mode {
			t.Fatalf("LoadMode(%v) gave mode %v", tc.mode, rec.StimMode)
		}
		lo, hi := float32(1), float32(0)
		for c := range rec.Stimulus {
			for _, v := range rec.Stimulus[c] {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if lo < tc.min || hi > tc.max {
			t.Errorf("%v: stimulus in [%g, %g], want within [%g, %g]", tc.mode, lo, hi, tc.min, tc.max)
		}
	}
	rec, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.StimMode != StimCausal {
		t.Errorf("Load binned in %v, want causal", rec.StimMode)
	}
}
