package graph

import (
	"fmt"
	"math"
	"testing"

	"rgcpred/model"
	"rgcpred/model/ref"
)

// TestParityWithReference runs the graph in inference mode and the float64
// reference (model/ref) on the same random weights and windows, for every
// configuration, and requires the head outputs to agree within 1e-4
// (relative to their size above 1) and the class probabilities within 1e-4.
func TestParityWithReference(t *testing.T) {
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
					net, err := ref.New(w)
					if err != nil {
						t.Fatal(err)
					}
					out, k, win := g.Output(), c.HeadOut(), c.InRows*c.InBins
					got := make([]float32, c.Classes)
					var worstOut, worstP float64
					for i := 0; i < batch; i++ {
						want := net.Forward(x[i*win:(i+1)*win], rows[i])
						var spread float64
						for o, v := range want {
							spread = math.Max(spread, math.Abs(v-want[0]))
							d := math.Abs(float64(out[i*k+o]) - v)
							worstOut = math.Max(worstOut, d/math.Max(1, math.Abs(v)))
						}
						if spread < 0.1 {
							t.Fatalf("window %d: reference outputs nearly constant (spread %g): the test is blind", i, spread)
						}
						c.Probs(out[i*k:(i+1)*k], got)
						for j, p := range ref.HeadProbs(c, want) {
							worstP = math.Max(worstP, math.Abs(float64(got[j]-p)))
						}
					}
					t.Logf("head outputs within %.2g, probabilities within %.2g", worstOut, worstP)
					if !(worstOut <= tol) {
						t.Errorf("largest head output difference %.3g > %g", worstOut, tol)
					}
					if !(worstP <= tol) {
						t.Errorf("largest probability difference %.3g > %g", worstP, tol)
					}
				})
			}
		}
	}
}
