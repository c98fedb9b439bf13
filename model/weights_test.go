package model

import (
	"math"
	"testing"
)

// TestWeightsEqual checks that Equal compares configurations and every
// tensor bit for bit: a changed value, a zero of the other sign, a missing
// or shortened tensor or another configuration make weights unequal; a
// copy, NaNs included, is equal.
func TestWeightsEqual(t *testing.T) {
	base := testCheckpoint(t, "gpt-a-cat-cpu", 3).Weights
	base.Tensors["head.bias"][1] = float32(math.NaN())
	for _, tc := range []struct {
		name   string
		mutate func(w *Weights)
		want   bool
	}{
		{"copy", func(w *Weights) {}, true},
		{"a value", func(w *Weights) { w.Tensors["head.bias"][0] += 1e-6 }, false},
		{"zero's sign", func(w *Weights) {
			w.Tensors["head.bias"][2] = 0
			base.Tensors["head.bias"][2] = float32(math.Copysign(0, -1))
		}, false},
		{"a tensor missing", func(w *Weights) { delete(w.Tensors, "head.bias") }, false},
		{"a tensor short", func(w *Weights) { w.Tensors["head.bias"] = w.Tensors["head.bias"][:1] }, false},
		{"another configuration", func(w *Weights) { w.Config.NumCells++ }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := base.Clone()
			defer func() { base = saved }()
			w := base.Clone()
			tc.mutate(w)
			if got := w.Equal(base); got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
			if got := base.Equal(w); got != tc.want {
				t.Errorf("reversed: Equal = %v, want %v", got, tc.want)
			}
		})
	}
}
