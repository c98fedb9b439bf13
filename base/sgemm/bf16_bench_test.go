package sgemm

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkGemmBF16Conv runs convolutions of the paper CNN (gpt-a-cat) as
// GEMMs with overlapping rows of A, float32 (GemmPackedBias) beside bf16
// (GemmPackedBiasBF16, conversion of A included) and int8
// (GemmPackedBiasI8, quantization of A with one scale included).
// GFLOP/cpu-s counts the same 2*m*n*k operations for all.
func BenchmarkGemmBF16Conv(b *testing.B) {
	for _, s := range []struct {
		name                     string
		lOut, cin, k, stride, co int
	}{
		{"block0.conv2", 256, 128, 7, 2, 128},
		{"block3.conv2", 64, 128, 7, 1, 128},
		{"stem.conv2", 512, 16, 21, 1, 16},
		{"block0.conv1", 512, 16, 1, 1, 128},
	} {
		rng := rand.New(rand.NewPCG(1, 1))
		K := s.k * s.cin
		x := randSlice(rng, (s.lOut-1)*s.stride*s.cin+K)
		w := randSlice(rng, K*s.co)
		bias := randSlice(rng, s.co)
		for i := range x {
			x[i] = max(x[i], 0) // a ReLU output, as int8 needs
		}
		pb, pb16, pb8 := NewPackedB(false, K, s.co, w, s.co), NewPackedBF16(false, K, s.co, w, s.co), NewPackedI8(false, K, s.co, w, s.co)
		xq := make([]uint8, len(x)+3)
		c := make([]float32, s.lOut*s.co)
		work := make([]float32, max(WorkSize(), WorkSizeBF16()))
		flops := 2 * float64(s.lOut) * float64(s.co) * float64(K)
		for _, p := range []struct {
			name string
			f    func()
		}{
			{"fp32", func() { GemmPackedBias(s.lOut, x, s.stride*s.cin, pb, bias, true, c, s.co, work) }},
			{"bf16", func() { GemmPackedBiasBF16(s.lOut, x, s.stride*s.cin, pb16, bias, true, c, s.co, work) }},
			{"int8", func() {
				scale, inv := U8Scale(3)
				QuantizeU8(xq, x, inv)
				GemmPackedBiasI8(s.lOut, xq, s.stride*s.cin, []float32{scale}, 0, nil, 0, pb8, bias, true, c, s.co, work)
			}},
		} {
			b.Run(s.name+"/"+p.name, func(b *testing.B) {
				if p.name == "bf16" && !BF16Native() {
					b.Skip("no AVX512_BF16: the portable kernel is not worth timing")
				}
				if p.name == "int8" && !I8Native() {
					b.Skip("no AVX512_VNNI: the portable kernel is not worth timing")
				}
				cpu0 := processCPU()
				for b.Loop() {
					p.f()
				}
				b.ReportMetric(flops*float64(b.N)/(processCPU()-cpu0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}
