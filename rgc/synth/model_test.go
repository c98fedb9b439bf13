package synth

import (
	"context"
	"math"
	"testing"

	"rgcpred/rgc"
)

// bruteLevel returns LED c's centred state at bin v of the stimulus known up
// to bin known (the frame covering known continues after it): 0 before the
// first frame.
func bruteLevel(f *frames, v, known, c int) float64 {
	if v > known {
		v = known
	}
	if v < f.start[0] {
		return 0
	}
	return level(f.pat[f.frameAt(v)], c)
}

// bruteDrive is the stimulus drive by direct convolution.
func bruteDrive(p *CellParams, f *frames, u, known int) float64 {
	d := 0.0
	for c := range p.StimFilter {
		for j, k := range p.StimFilter[c] {
			if u-j < 0 {
				break
			}
			d += k * bruteLevel(f, u-j, known, c)
		}
	}
	return d
}

func TestStimDriveMatchesConvolution(t *testing.T) {
	for _, tc := range []struct {
		name string
		cell CellParams
		dist []FrameLength
	}{
		{"drawn cell, default frames", DrawCell(7, 0, 0), DefaultFrameLengths()},
		{"opponent-ish cell, short frames", DrawCell(7, 4, 4), []FrameLength{{3, 0.5}, {11, 0.5}}},
		{"short filter", shortCell(0, 2, 12), []FrameLength{{5, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := drawFrames(newRand(3, streamStimulus), tc.dist, 1500)
			m := newCellModel(&tc.cell)
			for u := 0; u < 1500; u += 7 {
				want := bruteDrive(&tc.cell, f, u, u)
				if got := m.stimDrive(f, u, f.frameAt(u)); math.Abs(got-want) > 1e-9 {
					t.Fatalf("bin %d: drive %g, direct convolution %g", u, got, want)
				}
				// Known only up to an earlier bin, the current frame held.
				known := u - 1 - u%60
				if known < 0 {
					continue
				}
				want = bruteDrive(&tc.cell, f, u, known)
				if got := m.stimDrive(f, u, f.frameAt(known)); math.Abs(got-want) > 1e-9 {
					t.Fatalf("bin %d known to %d: drive %g, direct convolution %g", u, known, got, want)
				}
			}
		})
	}
}

// shortCell is a cell with a short stimulus filter starting at lag latency
// (so several future frames matter to the oracle) and a refractory history.
func shortCell(id, latency, n int) CellParams {
	c := CellParams{ClusterID: id, Type: "test", Bias: math.Log(20 / rgc.BinRateHz)}
	gains := [rgc.StimChannels]float64{1.5, -1, 0.7, 2}
	for ch := range c.StimFilter {
		c.StimFilter[ch] = make([]float64, n)
		for j := latency; j < n; j++ {
			c.StimFilter[ch][j] = gains[ch] / float64(n-latency) * (1 + 0.1*float64(j-latency))
		}
	}
	c.HistFilter = []float64{-5, -2, -0.5, 0.8, 0.5}
	return c
}

func TestDrawCellRanges(t *testing.T) {
	for i := 0; i < 40; i++ {
		c := DrawCell(11, i, i)
		m := newCellModel(&c)
		if m.latency < MinLatencyBins {
			t.Errorf("cell %d: latency %d bins, want >= %d", i, m.latency, MinLatencyBins)
		}
		if c.NominalRateHz < 0.9 || c.NominalRateHz > 8 {
			t.Errorf("cell %d: target rate %g Hz outside [0.9, 8]", i, c.NominalRateHz)
		}
		// Most of the filter's absolute weight lies 40-300 ms back.
		in, all := 0.0, 0.0
		for ch := range c.StimFilter {
			for j, k := range c.StimFilter[ch] {
				ms := float64(j) * rgc.BinMs
				all += math.Abs(k)
				if ms >= 40 && ms <= 300 {
					in += math.Abs(k)
				}
			}
		}
		if in < 0.9*all {
			t.Errorf("cell %d: only %.2f of the filter weight lies 40-300 ms back", i, in/all)
		}
		if c.HistFilter[0] > -3 {
			t.Errorf("cell %d: history filter at lag 1 is %g, want a strong refractory dip", i, c.HistFilter[0])
		}
		sd := math.Sqrt(driveVariance(c.StimFilter, 50))
		if sd < 2.19 || sd > 3.21 {
			t.Errorf("cell %d: drive standard deviation %g, want 2.2-3.2", i, sd)
		}
	}
	types := map[string]int{}
	for i := 0; i < 100; i++ {
		c := DrawCell(12, i, i)
		types[c.Type]++
		// The filter's polarity per channel matches the type.
		var sum [rgc.StimChannels]float64
		for ch := range c.StimFilter {
			for _, k := range c.StimFilter[ch][:MinLatencyBins+40] {
				sum[ch] += k // the first lobe dominates the first 40 bins
			}
		}
		switch c.Type {
		case "on":
			for ch, s := range sum {
				if s <= 0 {
					t.Errorf("ON cell %d: channel %d's first lobe is %g", i, ch, s)
				}
			}
		case "off":
			for ch, s := range sum {
				if s >= 0 {
					t.Errorf("OFF cell %d: channel %d's first lobe is %g", i, ch, s)
				}
			}
		case "opponent":
			if sum[0]*sum[3] >= 0 || sum[1]*sum[2] >= 0 {
				t.Errorf("opponent cell %d: first lobes %v are not long against short wavelengths", i, sum)
			}
		default:
			t.Errorf("cell %d: unknown type %q", i, c.Type)
		}
	}
	// 40% / 40% / 20%, within 4 binomial standard deviations of 100 draws.
	for typ, p := range map[string]float64{"on": 0.4, "off": 0.4, "opponent": 0.2} {
		if sd := math.Sqrt(100 * p * (1 - p)); math.Abs(float64(types[typ])-100*p) > 4*sd {
			t.Errorf("%d %s cells of 100, want about %.0f", types[typ], typ, 100*p)
		}
	}

	a, b := DrawCell(5, 3, 3), DrawCell(5, 3, 3)
	if a.Bias != b.Bias || a.StimFilter[2][60] != b.StimFilter[2][60] || a.HistFilter[7] != b.HistFilter[7] {
		t.Error("the same seed and index drew different cells")
	}
	if c := DrawCell(6, 3, 3); c.Bias == a.Bias {
		t.Error("different seeds drew the same bias")
	}
}

func TestSurvive(t *testing.T) {
	for _, l := range []float64{0, 1e-9, 1e-5, 1e-3, 0.0199999, 0.02, 0.5, 3, 50} {
		if got, want := survive(l), math.Exp(-l); math.Abs(got-want) > 1e-15 {
			t.Errorf("survive(%g) = %.17g, exp(-l) = %.17g", l, got, want)
		}
	}
}

// TestRatesLikeRealCells simulates drawn cells and checks that each fires at
// its calibrated target rate (within a factor 1.5: the calibration counts 2
// minutes of bursty spikes, the check 4, together about 20% error at 1 Hz)
// and that the rates span about the real quality cells' 0.8-8.6 Hz.
func TestRatesLikeRealCells(t *testing.T) {
	const minutes = 4
	raw, tr, err := Generate(context.Background(), Config{Cells: 12, Minutes: minutes, Seed: 13})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := math.Inf(1), 0.0
	for i, c := range raw.Cells {
		rate := float64(len(c.Spikes)) / (float64(raw.NumSamples) / rgc.SensorRateHz)
		want := tr.Cells[i].NominalRateHz
		t.Logf("cell %d (%s): %.2f Hz, target %.2f", i, tr.Cells[i].Type, rate, want)
		if rate < want/1.5 || rate > want*1.5 {
			t.Errorf("cell %d: %.2f Hz, target %.2f Hz", i, rate, want)
		}
		lo, hi = min(lo, rate), max(hi, rate)
	}
	if lo < 0.6 || lo > 2 || hi < 4 || hi > 10 {
		t.Errorf("rates span %.2f-%.2f Hz, want about 0.8-8.6 Hz", lo, hi)
	}
}
