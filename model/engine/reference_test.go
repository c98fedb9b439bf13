package engine

import (
	"fmt"
	"math"
	"testing"

	"rgcpred/model/ref"
	"rgcpred/rgc"
)

// TestEngineMatchesReference checks the engine's head outputs and
// probabilities against the float64 reference (model/ref), for all four
// stem/head combinations of the paper CNN and the CPU preset: head outputs
// within 1e-4 (relative to their size above 1), probabilities within 1e-4
// absolute; attention on the fused kernel (where the CPU has AVX-512) and
// on the GEMM path. The engine folds batch norm and the attention scale
// into its weights and computes in float32, so exact equality is not
// expected.
func TestEngineMatchesReference(t *testing.T) {
	const tol = 1e-4
	defer func(f bool) { fusedAttn = f }(fusedAttn)
	paths := []bool{false}
	if hasAVX512 {
		paths = append(paths, true)
	}
	for _, fused := range paths {
		for i, name := range []string{"gpt-a-cat", "gpt-a-logmix", "gpt-b-cat", "gpt-b-logmix", "gpt-a-cat-cpu", "gpt-b-logmix-cpu"} {
			t.Run(fmt.Sprintf("%s/fused=%v", name, fused), func(t *testing.T) {
				fusedAttn = fused
				w := randomWeights(t, name, len(cellIDs), uint64(i+1))
				net, err := ref.New(w)
				if err != nil {
					t.Fatal(err)
				}
				// maxBatch 1 with 2 windows exercises chunking; 2 threads the split.
				e, err := NewFromWeights(w, cellIDs, 1, 2)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				b := randomBatch(2, cellIDs, uint64(i+10))
				cfg := w.Config
				k := cfg.HeadOut()
				logits := make([]float32, b.Len()*k)
				probs := make([]float32, b.Len()*rgc.NumClasses)
				if err := e.Logits(b, logits); err != nil {
					t.Fatal(err)
				}
				if err := e.Predict(b, probs); err != nil {
					t.Fatal(err)
				}
				rows := map[int]int{12: 0, 40: 1, 7: 2} // cellIDs -> embedding row
				var maxOut, maxProbDiff float64
				for j := 0; j < b.Len(); j++ {
					window := b.Inputs[j*rgc.WindowLen : (j+1)*rgc.WindowLen]
					want := net.Forward(window, rows[b.Cells[j]])
					var spread float64
					for o, v := range want {
						got := float64(logits[j*k+o])
						maxOut = math.Max(maxOut, math.Abs(v))
						spread = math.Max(spread, math.Abs(v-want[0]))
						if d := math.Abs(got - v); d > tol*math.Max(1, math.Abs(v)) {
							t.Fatalf("window %d output %d: engine %v, reference %v (|diff| %g)", j, o, got, v, d)
						}
					}
					if spread < 0.1 {
						t.Fatalf("window %d: reference outputs nearly constant (spread %g): the test is blind", j, spread)
					}
					for c, p := range ref.HeadProbs(cfg, want) {
						got := probs[j*rgc.NumClasses+c]
						d := math.Abs(float64(got - p))
						maxProbDiff = math.Max(maxProbDiff, d)
						if d > tol {
							t.Fatalf("window %d class %d: engine p %v, reference %v", j, c, got, p)
						}
					}
				}
				t.Logf("max |head output| %.3g, max probability difference %.2g", maxOut, maxProbDiff)
			})
		}
	}
}
