//go:build !amd64 || purego

package engine

// hasAVX2 is false: no vectorised math on this platform.
const hasAVX2 = false

// geluTanh applies GELU with the tanh approximation (Hendrycks & Gimpel,
// 2016), as GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place.
func geluTanh(x []float32) { geluTanhGo(x) }

// expInPlace replaces x[i] by exp(x[i]) for arguments <= 87.
func expInPlace(x []float32) {
	for i, v := range x {
		x[i] = expf(max(v, -87))
	}
}
