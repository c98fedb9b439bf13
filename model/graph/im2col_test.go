package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIm2colMatchesDefinition checks im2col against its definition (col[(ci,
// k), j] = x[ci, j*s + k - pad], zero outside the input) and col2im against
// the adjoint of that map, exactly, for kernel sizes, strides and paddings
// where the padding covers none, part or all of a row, with and without
// the stride phases (polyphase: kernel wider than the stride).
func TestIm2colMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 7))
	for _, tc := range []struct{ l, k, s, pad int }{
		{11, 5, 2, 2}, {8, 3, 1, 1}, {6, 1, 2, 0}, {512, 21, 1, 10}, {1024, 21, 2, 10},
		{512, 7, 2, 3}, {64, 7, 1, 3}, {5, 7, 1, 6}, {3, 5, 3, 4}, {9, 4, 2, 0}, {2, 3, 1, 1},
	} {
		t.Run(fmt.Sprintf("l%d_k%d_s%d_p%d", tc.l, tc.k, tc.s, tc.pad), func(t *testing.T) {
			c := &conv1d{stride: tc.s, pad: tc.pad, par: parallel{n: 1}}
			const cin = 3
			d := convDims{b: 1, cin: cin, l: tc.l, cout: 1, k: tc.k, lout: (tc.l+2*tc.pad-tc.k)/tc.s + 1}
			x := make([]float32, cin*tc.l)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			col := make([]float32, cin*tc.k*d.lout)
			for i := range col {
				col[i] = float32(rng.NormFloat64()) // must be overwritten
			}
			ph := make([]float32, tc.s*c.phaseLen(d))
			c.im2col(d, x, col, ph)
			want := make([]float32, len(col))
			back := make([]float32, len(x))
			g := make([]float32, len(col))
			for i := range g {
				g[i] = float32(rng.IntN(9) - 4) // small integers: exact sums
			}
			for ci := 0; ci < cin; ci++ {
				for k := 0; k < tc.k; k++ {
					for j := 0; j < d.lout; j++ {
						r := (ci*tc.k+k)*d.lout + j
						if p := j*tc.s + k - tc.pad; p >= 0 && p < tc.l {
							want[r] = x[ci*tc.l+p]
							back[ci*tc.l+p] += g[r]
						}
					}
				}
			}
			for i := range col {
				if col[i] != want[i] {
					t.Fatalf("im2col[%d] = %g, want %g", i, col[i], want[i])
				}
			}
			dx := make([]float32, len(x))
			for i := range dx {
				dx[i] = 1e9 // must be overwritten
			}
			c.col2im(d, g, dx, ph)
			for i := range dx {
				if dx[i] != back[i] {
					t.Fatalf("col2im[%d] = %g, want %g", i, dx[i], back[i])
				}
			}
		})
	}
}
