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

// matvecAdd adds x W to y (W: len(x) rows of len(y) columns).
func matvecAdd(x, w, y []float32) { matvecAddGo(x, w, y) }

// addTo sets dst[i] += src[i] for i < len(dst) (src at least as long).
func addTo(dst, src []float32) { addToGo(dst, src[:len(dst)]) }

// gateRelu sets out[i] = max(h[i]*g[i] + s[i], 0) for i < len(out).
func gateRelu(out, h, g, s []float32) { gateReluGo(out, h[:len(out)], g[:len(out)], s[:len(out)]) }

// maxOf returns the largest element of x (len(x) >= 1).
func maxOf(x []float32) float32 { return maxOfGo(x) }

// sum returns the sum of x.
func sum(x []float32) float32 { return sumGo(x) }

// scaleAdd sets x[i] = x[i]*a + b.
func scaleAdd(x []float32, a, b float32) { scaleAddGo(x, a, b) }

// sumSqDev returns the sum of (x[i]-m)^2.
func sumSqDev(x []float32, m float32) float32 { return sumSqDevGo(x, m) }

// norm sets y[i] = (x[i]-m)*inv*w[i] + b[i] for i < len(x).
func norm(y, x, w, b []float32, m, inv float32) { normGo(y, x, w, b, m, inv) }
