//go:build amd64 && !purego

package engine

import "golang.org/x/sys/cpu"

// hasAVX2 selects the vectorised GELU and exp (vmath_amd64.s).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// geluAVX2 applies GELU (tanh form) in place to x[0:n]; n % 8 == 0.
//
//go:noescape
func geluAVX2(x *float32, n int)

// geluAVX512 is geluAVX2 for n % 16 == 0 (the same arithmetic, so the
// same results).
//
//go:noescape
func geluAVX512(x *float32, n int)

// expAVX2 replaces x[0:n] by exp(x[i]), arguments clamped to [-87, 87];
// n % 8 == 0.
//
//go:noescape
func expAVX2(x *float32, n int)

// geluTanh applies GELU with the tanh approximation (Hendrycks & Gimpel,
// 2016), as GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place.
func geluTanh(x []float32) {
	if n16 := len(x) &^ 15; hasAVX512 && n16 > 0 {
		geluAVX512(&x[0], n16)
		x = x[n16:]
	}
	n8 := len(x) &^ 7
	if hasAVX2 && n8 > 0 {
		geluAVX2(&x[0], n8)
		x = x[n8:]
	}
	geluTanhGo(x)
}

// expInPlace replaces x[i] by exp(x[i]) for arguments <= 87 (the softmax
// use: arguments are <= 0).
func expInPlace(x []float32) {
	n8 := len(x) &^ 7
	if hasAVX2 && n8 > 0 {
		expAVX2(&x[0], n8)
		x = x[n8:]
	}
	for i, v := range x {
		x[i] = expf(max(v, -87))
	}
}

//go:noescape
func addAVX2(dst, src *float32, n int)

//go:noescape
func matvecAVX2(x *float32, in int, w *float32, out int, y *float32)

// matvecAdd adds x W to y (W: len(x) rows of len(y) columns).
func matvecAdd(x, w, y []float32) {
	in, out := len(x), len(y)
	if hasAVX2 && out%8 == 0 && in > 0 && out > 0 {
		_ = w[in*out-1]
		matvecAVX2(&x[0], in, &w[0], out, &y[0])
		return
	}
	matvecAddGo(x, w, y)
}

//go:noescape
func gateReluAVX2(out, h, gate, sc *float32, n int)

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func sumAVX2(x *float32, n int) float32

//go:noescape
func scaleAddAVX2(x *float32, n int, a, b float32)

// addTo sets dst[i] += src[i] for i < len(dst) (src at least as long).
func addTo(dst, src []float32) {
	src = src[:len(dst)]
	n8 := len(dst) &^ 7
	if hasAVX2 && n8 > 0 {
		addAVX2(&dst[0], &src[0], n8)
		dst, src = dst[n8:], src[n8:]
	}
	addToGo(dst, src)
}

// gateRelu sets out[i] = max(h[i]*g[i] + s[i], 0) for i < len(out).
func gateRelu(out, h, g, s []float32) {
	h, g, s = h[:len(out)], g[:len(out)], s[:len(out)]
	n8 := len(out) &^ 7
	if hasAVX2 && n8 > 0 {
		gateReluAVX2(&out[0], &h[0], &g[0], &s[0], n8)
		out, h, g, s = out[n8:], h[n8:], g[n8:], s[n8:]
	}
	gateReluGo(out, h, g, s)
}

// maxOf returns the largest element of x (len(x) >= 1).
func maxOf(x []float32) float32 {
	n8 := len(x) &^ 7
	if !hasAVX2 || n8 == 0 {
		return maxOfGo(x)
	}
	m := maxAVX2(&x[0], n8)
	if n8 < len(x) {
		m = max(m, maxOfGo(x[n8:]))
	}
	return m
}

// sum returns the sum of x.
func sum(x []float32) float32 {
	n8 := len(x) &^ 7
	var s float32
	if hasAVX2 && n8 > 0 {
		s = sumAVX2(&x[0], n8)
		x = x[n8:]
	}
	return s + sumGo(x)
}

// scaleAdd sets x[i] = x[i]*a + b.
func scaleAdd(x []float32, a, b float32) {
	n8 := len(x) &^ 7
	if hasAVX2 && n8 > 0 {
		scaleAddAVX2(&x[0], n8, a, b)
		x = x[n8:]
	}
	scaleAddGo(x, a, b)
}

//go:noescape
func sumSqDevAVX2(x *float32, n int, m float32) float32

//go:noescape
func normAVX2(y, x, w, b *float32, n int, m, inv float32)

// sumSqDev returns the sum of (x[i]-m)^2.
func sumSqDev(x []float32, m float32) float32 {
	n8 := len(x) &^ 7
	var s float32
	if hasAVX2 && n8 > 0 {
		s = sumSqDevAVX2(&x[0], n8, m)
		x = x[n8:]
	}
	return s + sumSqDevGo(x, m)
}

// norm sets y[i] = (x[i]-m)*inv*w[i] + b[i] for i < len(x).
func norm(y, x, w, b []float32, m, inv float32) {
	y, w, b = y[:len(x)], w[:len(x)], b[:len(x)]
	n8 := len(x) &^ 7
	if hasAVX2 && n8 > 0 {
		normAVX2(&y[0], &x[0], &w[0], &b[0], n8, m, inv)
		y, x, w, b = y[n8:], x[n8:], w[n8:], b[n8:]
	}
	normGo(y, x, w, b, m, inv)
}
