package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// TestChannelsLastConvMatchesDefinition checks the channels-last forward
// pass (y[co, j] = sum over ci, k of w[co, ci, k] x[ci, j*s + k - pad])
// and data gradient (its adjoint), and the weight gradient of the same
// convolutions (im2col: dw[co, ci, k] = sum over windows and j of
// gy[co, j] x[ci, j*s + k - pad]), against the definition, exactly (small
// integers, so every float32 sum is exact), for strides 1 to 3, paddings
// that cover none, part or all of a window, kernels narrower and wider than
// the stride, batches split over two workers, and the paper CNN's shapes.
func TestChannelsLastConvMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, tc := range []struct{ b, cin, cout, l, k, s, pad int }{
		{3, 2, 4, 11, 5, 2, 2}, {2, 3, 2, 8, 3, 1, 1}, {2, 5, 3, 9, 4, 2, 0}, {3, 2, 3, 10, 5, 3, 4},
		{1, 3, 2, 5, 7, 1, 6}, {2, 2, 2, 2, 3, 1, 1}, {2, 4, 3, 7, 2, 3, 0}, {2, 3, 5, 12, 3, 2, 1},
		{4, 16, 16, 512, 21, 1, 10}, {2, 5, 16, 1024, 21, 2, 10}, {2, 128, 128, 512, 7, 2, 3}, {3, 32, 32, 64, 7, 1, 3},
	} {
		t.Run(fmt.Sprintf("b%d_cin%d_cout%d_l%d_k%d_s%d_p%d", tc.b, tc.cin, tc.cout, tc.l, tc.k, tc.s, tc.pad), func(t *testing.T) {
			c := &conv1d{stride: tc.s, pad: tc.pad, par: testPar(t, 2)}
			lout := (tc.l+2*tc.pad-tc.k)/tc.s + 1
			ints := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(rng.IntN(7) - 3)
				}
				return v
			}
			x, w, gy := ints(tc.b*tc.cin*tc.l), ints(tc.cout*tc.cin*tc.k), ints(tc.b*tc.cout*lout)
			in := []*tensor.Dense{
				tensor.New(tensor.WithShape(tc.b, tc.cin, tc.l), tensor.WithBacking(x)),
				tensor.New(tensor.WithShape(tc.cout, tc.cin, tc.k), tensor.WithBacking(w)),
			}
			wantY, wantDx, wantDw := make([]float32, len(gy)), make([]float32, len(x)), make([]float32, len(w))
			for b := 0; b < tc.b; b++ {
				for co := 0; co < tc.cout; co++ {
					for j := 0; j < lout; j++ {
						yi := (b*tc.cout+co)*lout + j
						for ci := 0; ci < tc.cin; ci++ {
							for k := 0; k < tc.k; k++ {
								if p := j*tc.s + k - tc.pad; p >= 0 && p < tc.l {
									xi := (b*tc.cin+ci)*tc.l + p
									wi := (co*tc.cin+ci)*tc.k + k
									wantY[yi] += w[wi] * x[xi]
									wantDx[xi] += w[wi] * gy[yi]
									wantDw[wi] += x[xi] * gy[yi]
								}
							}
						}
					}
				}
			}
			for _, pass := range []struct {
				name      string
				got, want []float32
				run       func([]float32)
			}{
				{"forward", make([]float32, len(gy)), wantY, func(o []float32) { c.forward(in, o) }},
				{"data gradient", make([]float32, len(x)), wantDx, func(o []float32) { c.backward(0, in, nil, gy, o) }},
				{"weight gradient", make([]float32, len(w)), wantDw, func(o []float32) { c.backward(1, in, nil, gy, o) }},
			} {
				for i := range pass.got {
					pass.got[i] = 1e9 // must be overwritten
				}
				pass.run(pass.got)
				for i := range pass.got {
					if pass.got[i] != pass.want[i] {
						t.Fatalf("%s[%d] = %g, want %g", pass.name, i, pass.got[i], pass.want[i])
					}
				}
			}
		})
	}
}
