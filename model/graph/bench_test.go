package graph

import (
	"fmt"
	"testing"

	"rgcpred/model"
)

// BenchmarkTrainStep measures one training step (forward + backward; the
// optimiser update is not included) of gpt-a-cat (paper and cpu CNN) at
// batch 64, with the im2col + SGEMM convolution kernel and with gorgonia's
// own Conv2d as the baseline. It reports samples/s.
func BenchmarkTrainStep(b *testing.B) {
	const batch = 64
	for _, cnn := range []string{model.CNNPaper, model.CNNCPU} {
		for _, gconv := range []bool{false, true} {
			name := fmt.Sprintf("gpt-a-cat/%s/conv=%s", cnn, map[bool]string{false: "sgemm", true: "gorgonia"}[gconv])
			b.Run(name, func(b *testing.B) {
				c, err := model.NewConfig(model.StemGPTA, model.HeadCat, cnn, 60)
				if err != nil {
					b.Fatal(err)
				}
				w := randomWeights(b, c, 1)
				g, err := New(w, batch, Options{Training: true, Threads: 2, GorgoniaConv: gconv})
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				x, cells, tg := randomBatch(c, batch, 1)
				if err := g.SetInputs(x, cells, tg); err != nil {
					b.Fatal(err)
				}
				if _, err := g.Run(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := g.Run(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}
