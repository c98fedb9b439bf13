//go:build amd64 && !purego

package engine

import (
	"math"
	"testing"
)

// checkGeluWide checks that GELU on 16 lanes (what geluTanh gave, g) has
// the bits of the 8-lane kernel, whose arithmetic it repeats.
func checkGeluWide(t *testing.T, xs, g []float32) {
	t.Helper()
	if !hasAVX512 || !hasAVX2 {
		return
	}
	n8 := len(xs) &^ 7
	g8 := append([]float32(nil), xs[:n8]...)
	geluAVX2(&g8[0], n8)
	for i := range g8 {
		if math.Float32bits(g8[i]) != math.Float32bits(g[i]) {
			t.Fatalf("gelu(%v): 16 lanes %v, 8 lanes %v", xs[i], g[i], g8[i])
		}
	}
}

// BenchmarkGelu is GELU over one gpt-b layer's MLP activations (64 tokens
// of 512), in place (ns per value in ns/value).
func BenchmarkGelu(b *testing.B) {
	x := make([]float32, 64*512)
	for i := range x {
		x[i] = float32(i%97)/16 - 3
	}
	y := make([]float32, len(x))
	for b.Loop() {
		copy(y, x)
		geluTanh(y)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/value")
}
