package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSoftmaxCausal checks every row against the float64 softmax of the
// entries it may see, and that the others are zero.
func TestSoftmaxCausal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct{ nq, T, q0 int }{{1, 1, 0}, {4, 4, 0}, {1, 64, 63}, {3, 37, 10}, {64, 64, 0}}
	for _, c := range cases {
		att := make([]float32, c.nq*c.T)
		for i := range att {
			att[i] = float32(rng.NormFloat64() * 4)
		}
		in := append([]float32(nil), att...)
		SoftmaxCausal(att, c.nq, c.T, c.q0)
		for i := 0; i < c.nq; i++ {
			n := c.q0 + i + 1
			x := in[i*c.T : i*c.T+n]
			m := math.Inf(-1)
			for _, v := range x {
				m = math.Max(m, float64(v))
			}
			var z float64
			for _, v := range x {
				z += math.Exp(float64(v) - m)
			}
			for j := 0; j < c.T; j++ {
				got, want := float64(att[i*c.T+j]), 0.0
				if j < n {
					want = math.Exp(float64(x[j])-m) / z
				}
				if math.Abs(got-want) > 1e-6 {
					t.Fatalf("nq %d T %d q0 %d: row %d col %d = %g, want %g", c.nq, c.T, c.q0, i, j, got, want)
				}
			}
		}
	}
}
