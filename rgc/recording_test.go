package rgc

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// kernel returns the FIR taps h[-M..M] from the cumulative kernel.
func kernel() []float64 {
	cum := stimKernelCum()
	h := make([]float64, len(cum))
	prev := 0.0
	for i, c := range cum {
		h[i] = c - prev
		prev = c
	}
	return h
}

func TestStimFilterResponse(t *testing.T) {
	h := kernel()
	m := StimFilterHalfTaps
	gain := func(hz float64) float64 {
		var s complex128
		for i, v := range h {
			s += complex(v, 0) * cmplx.Exp(complex(0, -2*math.Pi*hz/SensorRateHz*float64(i-m)))
		}
		return cmplx.Abs(s)
	}
	binNyquist := SensorRateHz / Decimation / 2
	cases := []struct {
		hz     float64
		lo, hi float64
	}{
		{0, 1 - 1e-12, 1 + 1e-12},   // unit DC gain
		{20, 0.995, 1.005},          // the 20 Hz frame rate passes (Hamming ripple < 0.5%)
		{200, 0.995, 1.005},         // passband
		{binNyquist, 0, 0.01},       // > 40 dB down at the bin Nyquist
		{binNyquist * 1.5, 0, 0.01}, // would alias into the passband
		{3 * binNyquist, 0, 0.01},   // far stopband
		{SensorRateHz / 2 * 0.99, 0, 0.01},
	}
	for _, tc := range cases {
		if g := gain(tc.hz); g < tc.lo || g > tc.hi {
			t.Errorf("gain at %.1f Hz = %.5f, want in [%g, %g]", tc.hz, g, tc.lo, tc.hi)
		}
	}
	for i := range h {
		if math.Abs(h[i]-h[len(h)-1-i]) > 1e-15 {
			t.Fatalf("kernel not symmetric at %d", i)
		}
	}
}

// TestBinStimulusMatchesConvolution checks the piecewise-constant shortcut
// against a direct convolution at the sensor rate on random frames.
func TestBinStimulusMatchesConvolution(t *testing.T) {
	pattern, triggers := randomFrames(rand.New(rand.NewPCG(1, 2)), 40)
	numSamples := triggers[len(triggers)-1] + 1000
	got := BinStimulus(StimZeroPhase, pattern, triggers, numSamples)
	h := kernel()
	m := StimFilterHalfTaps
	x := stepFunction(pattern, triggers, numSamples)
	bins := int(numSamples / Decimation)
	for c := 0; c < StimChannels; c++ {
		if len(got[c]) != bins {
			t.Fatalf("channel %d has %d bins, want %d", c, len(got[c]), bins)
		}
		for b := 0; b < bins; b++ {
			centre := b*Decimation + Decimation/2
			want := 0.0
			for k := -m; k <= m; k++ {
				n := centre - k
				if n >= 0 && n < int(numSamples) {
					want += h[k+m] * x[n][c]
				}
			}
			if math.Abs(float64(got[c][b])-want) > 1e-6 {
				t.Fatalf("channel %d bin %d: %g, want %g", c, b, got[c][b], want)
			}
		}
	}
}

func TestBinStimulusEdges(t *testing.T) {
	// One LED on for frames 1 and 2 ([2000, 8000)), off elsewhere.
	pattern := [][StimChannels]int8{{0, 1, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 0}, {0, 1, 0, 0}}
	triggers := []int64{1000, 2000, 5000, 8000, 9000}
	st := BinStimulus(StimZeroPhase, pattern, triggers, 12000)
	for b := range st[0] {
		c := float64(b*Decimation + Decimation/2)
		v := float64(st[0][b])
		switch {
		case c < 2000-StimFilterHalfTaps || c > 8000+StimFilterHalfTaps:
			if v != 0 {
				t.Fatalf("bin %d (sample %g) far from the on period is %g, want 0", b, c, v)
			}
		case c > 2000+StimFilterHalfTaps && c < 8000-StimFilterHalfTaps:
			if math.Abs(v-1) > 1e-6 {
				t.Fatalf("bin %d inside the on period is %g, want 1", b, v)
			}
		}
		// A sharp low-pass rings at a step (Gibbs): at most the 8.95% of
		// the ideal filter.
		if v < -0.0895 || v > 1.0895 {
			t.Fatalf("bin %d overshoots: %g", b, v)
		}
	}
	// Green is on for all frames: off before the first trigger and after the last.
	if st[1][0] != 0 || st[1][len(st[1])-1] != 0 {
		t.Errorf("LED on outside the triggers: first %g last %g", st[1][0], st[1][len(st[1])-1])
	}
	// The rising edge at sample 2000 lies between the centres of bins 110
	// (1989) and 111 (2007); the falling edge at 8000 between those of bins
	// 443 (7983) and 444 (8001): the filtered step crosses one half there.
	if !(st[0][110] < 0.5 && st[0][111] > 0.5 && st[0][443] > 0.5 && st[0][444] < 0.5) {
		t.Errorf("edges misplaced: bins 110, 111 = %g, %g; bins 443, 444 = %g, %g", st[0][110], st[0][111], st[0][443], st[0][444])
	}
	// Degenerate inputs give all-off rows, not a panic.
	empty := BinStimulus(StimZeroPhase, nil, nil, 100)
	if len(empty[0]) != 5 || empty[0][0] != 0 {
		t.Errorf("empty pattern: %v", empty[0])
	}
}

func TestShippedStimulusAndSpikes(t *testing.T) {
	rec, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	raw := rec.Raw
	for c := 0; c < StimChannels; c++ {
		// The mean filtered intensity equals the LED's on-time fraction of
		// the recording (filtering preserves the mean), within 0.1%.
		var on int64
		for f, p := range raw.Pattern {
			if p[c] == 1 {
				on += raw.Triggers[f+1] - raw.Triggers[f]
			}
		}
		want := float64(on) / float64(rec.Bins*Decimation)
		sum := 0.0
		for _, v := range rec.Stimulus[c] {
			sum += float64(v)
			if v < -0.0895 || v > 1.0895 {
				t.Fatalf("channel %d value %g out of range", c, v)
			}
		}
		if got := sum / float64(rec.Bins); math.Abs(got-want) > 1e-3 {
			t.Errorf("channel %d mean %.5f, want %.5f", c, got, want)
		}
	}
	binned := 0
	for i, c := range rec.Cells {
		for k, b := range c.SpikeBins {
			if int64(b) != raw.Cells[i].Spikes[k]/Decimation {
				t.Fatalf("cell %d spike %d: bin %d for sample %d", i, k, b, raw.Cells[i].Spikes[k])
			}
		}
		if len(c.SpikeBins) < len(raw.Cells[i].Spikes) {
			// only spikes in the trailing partial bin may be dropped
			if raw.Cells[i].Spikes[len(c.SpikeBins)] < int64(rec.Bins)*Decimation {
				t.Errorf("cell %d lost a spike inside the binned range", i)
			}
		}
		binned += len(c.SpikeBins)
	}
	if binned < 194460-5 || binned > 194460 {
		t.Errorf("%d binned spikes, want 194460 less at most a few in the partial bin", binned)
	}
	// Quality cell rates: about 0.8 Hz to 8.6 Hz (data/README.md).
	lo, hi := math.Inf(1), 0.0
	for i := range rec.Cells {
		if rec.Cells[i].Quality {
			r := rec.RateHz(i)
			lo, hi = math.Min(lo, r), math.Max(hi, r)
		}
	}
	if math.Abs(lo-0.77) > 0.05 || math.Abs(hi-8.69) > 0.05 {
		t.Errorf("quality rates %.2f..%.2f Hz, want about 0.77..8.69", lo, hi)
	}
}
