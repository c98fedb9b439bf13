package graph

import (
	"fmt"
	"math"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// TestParityWithEngine runs the graph in inference mode and the inference
// engine on the same random weights and windows, for every configuration,
// and requires the class probabilities to agree within 1e-4.
func TestParityWithEngine(t *testing.T) {
	const batch, tol = 3, 1e-4
	for _, stem := range []string{model.StemGPTA, model.StemGPTB} {
		for _, head := range []string{model.HeadCat, model.HeadLogMix} {
			for _, cnn := range []string{model.CNNPaper, model.CNNCPU} {
				name := fmt.Sprintf("%s-%s-%s", stem, head, cnn)
				t.Run(name, func(t *testing.T) {
					c, err := model.NewConfig(stem, head, cnn, 4)
					if err != nil {
						t.Fatal(err)
					}
					w := randomWeights(t, c, 11)
					x, rows, _ := randomBatch(c, batch, 12)
					g, err := New(w, batch, Options{Threads: 2})
					if err != nil {
						t.Fatal(err)
					}
					defer g.Close()
					if err := g.SetInputs(x, rows, nil); err != nil {
						t.Fatal(err)
					}
					if _, err := g.Run(); err != nil {
						t.Fatal(err)
					}
					ids := []int{100, 101, 102, 103}
					e, err := engine.NewFromWeights(w, ids, batch, 1)
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close()
					b := &rgc.Batch{Inputs: x, Cells: make([]int, batch), Ends: make([]int, batch)}
					for i, r := range rows {
						b.Cells[i] = ids[r]
					}
					want := make([]float32, batch*rgc.NumClasses)
					if err := e.Predict(b, want); err != nil {
						t.Fatal(err)
					}
					out, k := g.Output(), c.HeadOut()
					got := make([]float32, rgc.NumClasses)
					var worst float64
					for i := 0; i < batch; i++ {
						if head == model.HeadCat {
							model.CatProbs(out[i*k:(i+1)*k], got)
						} else {
							model.LogMixProbs(out[i*k:(i+1)*k], c.Mixtures, got)
						}
						for j, p := range got {
							worst = math.Max(worst, math.Abs(float64(p)-float64(want[i*rgc.NumClasses+j])))
						}
					}
					if !(worst <= tol) {
						t.Errorf("largest probability difference %.3g > %g", worst, tol)
					}
				})
			}
		}
	}
}
