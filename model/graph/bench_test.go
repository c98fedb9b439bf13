package graph

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"rgcpred/model"
)

// BenchmarkTrainStep measures one training step (forward + backward; the
// optimiser update is not included) at batch 64 of gpt-a-cat (paper and cpu
// CNN; with the im2col + SGEMM convolution kernel and with gorgonia's own
// Conv2d as the baseline) and of gpt-b-cat-cpu, and gpt-a-cat-cpu with
// its GEMMs in bf16 (Options.BF16: emulated by rounding where the CPU
// lacks AVX512_BF16). It reports samples/s.
func BenchmarkTrainStep(b *testing.B) {
	const batch = 64
	for _, tc := range []struct {
		stem, cnn string
		gconvs    []bool
		bf16      bool
	}{
		{model.StemGPTA, model.CNNPaper, []bool{false, true}, false},
		{model.StemGPTA, model.CNNCPU, []bool{false, true}, false},
		{model.StemGPTB, model.CNNCPU, []bool{false}, false},
		{model.StemGPTA, model.CNNCPU, []bool{false}, true},
	} {
		for _, gconv := range tc.gconvs {
			name := fmt.Sprintf("%s-cat/%s/conv=%s", tc.stem, tc.cnn, map[bool]string{false: "sgemm", true: "gorgonia"}[gconv])
			if tc.bf16 {
				name += "/bf16"
			}
			b.Run(name, func(b *testing.B) {
				c, err := model.NewConfig(tc.stem, model.HeadCat, tc.cnn, 60)
				if err != nil {
					b.Fatal(err)
				}
				w := randomWeights(b, c, 1)
				g, err := New(w, batch, Options{Training: true, Threads: 2, GorgoniaConv: gconv, Profile: true, BF16: tc.bf16})
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				x, cells, tg := randomBatch(c, batch, 1)
				if err := g.SetInputs(x, cells, tg); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if _, err := g.Run(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					if _, err := g.Run(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
				if cpu := processCPU() - cpu0; cpu > 0 {
					// Samples per CPU-second of the process: the throughput
					// two otherwise idle cores would give, up to imperfect
					// parallelism, is 2 x this at most.
					b.ReportMetric(float64(batch*b.N)/cpu, "samples/cpu-s")
				}
				logProfile(b, g.Profile(), time.Since(start))
			})
		}
	}
}

// logProfile logs the kernels' share of the wall time of all runs (the
// warm-up run included), largest first; the rest is the executor's
// additions and its own loop.
func logProfile(b *testing.B, p map[string]time.Duration, total time.Duration) {
	type kv struct {
		k string
		v time.Duration
	}
	var kvs []kv
	var sum time.Duration
	for k, v := range p {
		kvs = append(kvs, kv{k, v})
		sum += v
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v })
	var sb strings.Builder
	for _, e := range kvs {
		if e.v*100 >= total {
			fmt.Fprintf(&sb, "%s %.0f%%, ", e.k, 100*e.v.Seconds()/total.Seconds())
		}
	}
	fmt.Fprintf(&sb, "outside kernels (the executor's additions and loop) %.0f%%", 100*(total-sum).Seconds()/total.Seconds())
	b.Log(sb.String())
}
