//go:build amd64 && !purego

package vec

import (
	"math"
	"testing"
)

// checkGeluWide checks that GELU on 16 lanes has the bits of the 8-lane
// kernel, whose arithmetic it repeats (on CPUs with AVX-512).
func checkGeluWide(t *testing.T, xs []float32) {
	t.Helper()
	n16 := len(xs) &^ 15
	if !hasAVX512 || !hasAVX2 || n16 == 0 {
		return
	}
	g16 := append([]float32(nil), xs[:n16]...)
	geluAVX512(&g16[0], n16)
	g8 := append([]float32(nil), xs[:n16]...)
	geluAVX2(&g8[0], n16)
	for i := range g8 {
		if math.Float32bits(g8[i]) != math.Float32bits(g16[i]) {
			t.Fatalf("gelu(%v): 16 lanes %v, 8 lanes %v", xs[i], g16[i], g8[i])
		}
	}
}
