package synth

import (
	"context"
	"math"
	"testing"

	"rgcpred/rgc"
)

// BenchmarkGenerate simulates 60 cells x 15 minutes (the size of the real
// recording); run with -benchtime=1x. Baseline in the same run:
// BenchmarkGenerateStimulusOnly.
func BenchmarkGenerate(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, _, err := Generate(context.Background(), Config{Cells: 60, Minutes: 15, Seed: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOracle measures the oracle on windows of a drawn population with
// the default frames, through Predict; windows/s is the figure of merit.
func BenchmarkOracle(b *testing.B) {
	_, _, rec, o := generate(b, Config{Cells: 4, Minutes: 2, Seed: 3})
	first, last, _ := rec.WindowRange(rgc.Train)
	var refs []rgc.WindowRef
	for t := first; t <= last && len(refs) < 256; t += 37 {
		refs = append(refs, rgc.WindowRef{Cell: len(refs) % 4, T: t})
	}
	var batch rgc.Batch
	rec.FillBatch(refs, &batch, nil)
	out := make([]float32, len(refs)*rgc.NumClasses)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := o.Predict(&batch, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(refs))/b.Elapsed().Seconds(), "windows/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N*len(refs)), "µs/window")
}

// BenchmarkBaselineBinStimulus is the baseline for BenchmarkGenerate: binning
// (rgc.BinStimulus) the stimulus of a 15-minute recording once, as every
// rgc.Load does.
func BenchmarkBaselineBinStimulus(b *testing.B) {
	raw, _, err := Generate(context.Background(), Config{Cells: 1, Minutes: 15, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rgc.BinStimulus(rgc.StimCausal, raw.Pattern, raw.Triggers, raw.NumSamples)
	}
}

// BenchmarkBaselineExp80 is the baseline for BenchmarkOracle: 80
// exponentials, the cost of one survival curve over the horizon with the
// future stimulus known.
func BenchmarkBaselineExp80(b *testing.B) {
	s := 0.0
	for i := 0; i < b.N; i++ {
		for k := 0; k < rgc.Horizon; k++ {
			s += math.Exp(-float64(k) * 1e-3 * float64(i&7))
		}
	}
	if s == 0 {
		b.Fatal("unreachable")
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N), "µs/window")
}
