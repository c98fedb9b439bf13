package synth

import (
	"math"
	"strings"
	"testing"

	"rgcpred/rgc"
)

// TestWindowOracleMatchesOracle compares the window oracle, which reads
// only the windows, with the recording's oracle on the same windows of a
// synthetic recording. Where the frame covering the window's end follows a
// visible switch and has lasted no longer than the shortest frame, no
// hidden switch can have fallen since, so the two agree (within float32
// rounding). Elsewhere the window oracle does not know whether one did:
// its distributions are proper and its mean NLL is close to the oracle's,
// and not better by more than the noise (the oracle knows more).
func TestWindowOracleMatchesOracle(t *testing.T) {
	raw, tr, rec, o := generate(t, Config{Cells: 3, Minutes: 3, Seed: 77})
	wo, err := NewWindowOracle(tr)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := framesFromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	var refs []rgc.WindowRef
	for c := range rec.Cells {
		for end := rgc.WindowBins + 100; end < rec.Bins-rgc.Horizon; end += 37 {
			refs = append(refs, rgc.WindowRef{Cell: c, T: end})
		}
	}
	var b rgc.Batch
	targets := make([]int, len(refs))
	rec.FillBatch(refs, &b, targets)
	exact := make([]float32, len(refs)*rgc.NumClasses)
	fromWin := make([]float32, len(refs)*rgc.NumClasses)
	if err := o.Predict(&b, exact); err != nil {
		t.Fatal(err)
	}
	ends := b.Ends
	b.Ends = make([]int, len(ends)) // the window oracle must not need them
	if err := wo.Predict(&b, fromWin); err != nil {
		t.Fatal(err)
	}
	minLen := tr.FrameLengths[0].Bins
	for _, l := range tr.FrameLengths {
		if l.Prob > 0 {
			minLen = min(minLen, l.Bins)
		}
	}
	var known, unsure int
	var dUnsure, sdUnsure, maxKnown float64
	for i := range refs {
		f := fr.frameAt(ends[i])
		pe, pw := exact[i*rgc.NumClasses:][:rgc.NumClasses], fromWin[i*rgc.NumClasses:][:rgc.NumClasses]
		sum := 0.0
		for _, p := range pw {
			sum += float64(p)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Fatalf("window %d sums to %v", i, sum)
		}
		if f > 0 && fr.pat[f] != fr.pat[f-1] && ends[i]-fr.start[f]+1 <= minLen {
			known++
			for k := range pe {
				maxKnown = max(maxKnown, math.Abs(float64(pe[k]-pw[k])))
			}
			continue
		}
		unsure++
		k := targets[i]
		d := math.Log(float64(pe[k])) - math.Log(float64(pw[k]))
		dUnsure += d
		sdUnsure += d * d
	}
	mean := dUnsure / float64(max(unsure, 1))
	se := math.Sqrt((sdUnsure/float64(max(unsure, 1)) - mean*mean) / float64(max(unsure, 1)))
	t.Logf("%d windows where no hidden switch can have fallen: largest difference %.2g; %d others: mean NLL window - exact %+.4f (SE %.4f)",
		known, maxKnown, unsure, mean, se)
	if maxKnown > 2e-6 {
		t.Errorf("where no hidden switch can have fallen the window oracle differs from the oracle by %g", maxKnown)
	}
	if known < 1000 || unsure < 1000 {
		t.Fatalf("%d and %d windows: too few to compare", known, unsure)
	}
	if mean < -4*se || mean > 0.02 {
		t.Errorf("the window oracle's mean NLL is %+.4f (SE %.4f) from the oracle's, want within [-4 SE, +0.02]", mean, se)
	}
}

// TestWindowOracleDecoding checks how windows are read: values outside
// [0, 1] (a zero-phase filter's ringing, NaN) are refused with an error
// saying why, and bins no single switch gives are read without failing.
func TestWindowOracleDecoding(t *testing.T) {
	_, tr, rec, _ := generate(t, Config{Cells: 1, Minutes: 1, Seed: 5})
	wo, err := NewWindowOracle(tr)
	if err != nil {
		t.Fatal(err)
	}
	var b rgc.Batch
	rec.FillBatch([]rgc.WindowRef{{Cell: 0, T: rgc.WindowBins + 500}}, &b, make([]int, 1))
	base := append([]float32(nil), b.Inputs...)
	for _, tc := range []struct {
		name string
		edit func(w []float32)
		want string // "" for no error
	}{
		{"NaN", func(w []float32) { w[10] = float32(math.NaN()) }, "not an on-fraction"},
		{"ringing below", func(w []float32) { w[10] = -0.05 }, "not an on-fraction"},
		{"ringing above", func(w []float32) { w[rgc.WindowBins+10] = 1.05 }, "not an on-fraction"},
		{"off the sample grid", func(w []float32) { w[10] = 0.3 }, ""},
		{"two LEDs at different times", func(w []float32) {
			w[99], w[rgc.WindowBins+99] = 0, 0
			w[100], w[rgc.WindowBins+100] = 5.0/rgc.Decimation, 11.0/rgc.Decimation
		}, ""},
		{"two switches in a row", func(w []float32) {
			w[100] = 7.0 / rgc.Decimation
			w[101] = 7.0 / rgc.Decimation
		}, ""},
		{"no stimulus at all", func(w []float32) { clear(w[:rgc.SpikeRow*rgc.WindowBins]) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copy(b.Inputs, base)
			tc.edit(b.Inputs)
			out := make([]float32, rgc.NumClasses)
			err := wo.Predict(&b, out)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for _, p := range out {
				sum += float64(p)
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("probabilities sum to %v", sum)
			}
		})
	}
}

// TestWindowOracleAllocatesNothing checks that predicting a window
// allocates nothing once the oracle's scratch has grown (the daemon's hot
// path).
func TestWindowOracleAllocatesNothing(t *testing.T) {
	_, tr, rec, _ := generate(t, Config{Cells: 2, Minutes: 1, Seed: 9})
	wo, err := NewWindowOracle(tr)
	if err != nil {
		t.Fatal(err)
	}
	var b rgc.Batch
	refs := []rgc.WindowRef{{Cell: 0, T: rgc.WindowBins + 300}, {Cell: 1, T: rgc.WindowBins + 2000}}
	rec.FillBatch(refs, &b, make([]int, len(refs)))
	out := make([]float32, len(refs)*rgc.NumClasses)
	if err := wo.Predict(&b, out); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := wo.Predict(&b, out); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}
