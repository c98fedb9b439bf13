//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

// hasAVX2 selects the AVX2+FMA kernels (vec_amd64.s), hasAVX512 the
// 16-lane GELU.
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ
)

// wide8 is the length of the prefix of an n-vector that the AVX2 kernels
// take (a multiple of 8), 0 without AVX2.
func wide8(n int) int {
	if !hasAVX2 {
		return 0
	}
	return n &^ 7
}

// The kernels below take n, a multiple of 8 (16 for geluAVX512), and
// pointers to at least n floats.

//go:noescape
func geluAVX2(x *float32, n int)

//go:noescape
func geluAVX512(x *float32, n int)

//go:noescape
func geluDerivAVX2(y, d, x *float32, n int)

//go:noescape
func expAVX2(x *float32, n int)

//go:noescape
func addAVX2(d, x, y *float32, n int)

//go:noescape
func mulAVX2(d, x, y *float32, n int)

//go:noescape
func affineAVX2(y, x *float32, n int, a, b float32)

//go:noescape
func affineReLUAVX2(y, x *float32, n int, a, b float32)

//go:noescape
func maskPosAVX2(d, dy, o *float32, n int)

//go:noescape
func gateReLUAVX2(out, h, gate, sc *float32, n int)

//go:noescape
func normAVX2(y, x, w, b *float32, n int, m, inv float32)

//go:noescape
func bnDxAVX2(d, dy, x *float32, n int, k, a, m, c float32)

//go:noescape
func bnDxPosAVX2(d, dy, x, o *float32, n int, k, a, m, c float32)

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func sumAVX2(x *float32, n int) float32

//go:noescape
func dotAVX2(x, y *float32, n int) float32

//go:noescape
func sumSqDevAVX2(x *float32, n int, m float32) float32

//go:noescape
func gradSumsAVX2(dy, x *float32, n int, m float32) (sg, sgx float32)

//go:noescape
func gradSumsPosAVX2(dy, x, o *float32, n int, m float32) (sg, sgx float32)

//go:noescape
func matvecAVX2(x *float32, in int, w *float32, out int, y *float32)

// Gelu applies GELU with the tanh approximation (Hendrycks & Gimpel, 2016),
// as GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + GELUCubic x^3))), in place.
func Gelu(x []float32) {
	if n16 := len(x) &^ 15; hasAVX512 && hasAVX2 && n16 > 0 {
		geluAVX512(&x[0], n16)
		x = x[n16:]
	}
	if n := wide8(len(x)); n > 0 {
		geluAVX2(&x[0], n)
		x = x[n:]
	}
	geluGo(x)
}

// GeluDeriv sets y = gelu(x) (Gelu's function) and d = gelu'(x), the local
// derivative that a backward pass multiplies by the output gradient.
func GeluDeriv(y, d, x []float32) {
	d, x = d[:len(y)], x[:len(y)]
	if n := wide8(len(y)); n > 0 {
		geluDerivAVX2(&y[0], &d[0], &x[0], n)
		y, d, x = y[n:], d[n:], x[n:]
	}
	geluDerivGo(y, d, x)
}

// Exp replaces x[i] by e^x[i], arguments clamped to [-87, 87] (the softmax
// use: arguments <= 0).
func Exp(x []float32) {
	if n := wide8(len(x)); n > 0 {
		expAVX2(&x[0], n)
		x = x[n:]
	}
	expGo(x)
}

// Add sets d = x + y (d may be x or y).
func Add(d, x, y []float32) {
	x, y = x[:len(d)], y[:len(d)]
	if n := wide8(len(d)); n > 0 {
		addAVX2(&d[0], &x[0], &y[0], n)
		d, x, y = d[n:], x[n:], y[n:]
	}
	addGo(d, x, y)
}

// Mul sets d = x * y element-wise (d may be x or y).
func Mul(d, x, y []float32) {
	x, y = x[:len(d)], y[:len(d)]
	if n := wide8(len(d)); n > 0 {
		mulAVX2(&d[0], &x[0], &y[0], n)
		d, x, y = d[n:], x[n:], y[n:]
	}
	mulGo(d, x, y)
}

// Affine sets y = x*a + b (multiply, then add; y may be x).
func Affine(y, x []float32, a, b float32) {
	x = x[:len(y)]
	if n := wide8(len(y)); n > 0 {
		affineAVX2(&y[0], &x[0], n, a, b)
		y, x = y[n:], x[n:]
	}
	affineGo(y, x, a, b)
}

// AffineReLU sets y = max(x*a + b, 0) (y may be x); NaN passes, so that a
// diverging run shows in its loss.
func AffineReLU(y, x []float32, a, b float32) {
	x = x[:len(y)]
	if n := wide8(len(y)); n > 0 {
		affineReLUAVX2(&y[0], &x[0], n, a, b)
		y, x = y[n:], x[n:]
	}
	affineReLUGo(y, x, a, b)
}

// MaskPos sets d = g where o is not zero, else 0: ReLU's backward pass
// given its output o (>= 0).
func MaskPos(d, g, o []float32) {
	g, o = g[:len(d)], o[:len(d)]
	if n := wide8(len(d)); n > 0 {
		maskPosAVX2(&d[0], &g[0], &o[0], n)
		d, g, o = d[n:], g[n:], o[n:]
	}
	maskPosGo(d, g, o)
}

// GateReLU sets out = max(h*g + s, 0) element-wise; NaN passes.
func GateReLU(out, h, g, s []float32) {
	h, g, s = h[:len(out)], g[:len(out)], s[:len(out)]
	if n := wide8(len(out)); n > 0 {
		gateReLUAVX2(&out[0], &h[0], &g[0], &s[0], n)
		out, h, g, s = out[n:], h[n:], g[n:], s[n:]
	}
	gateReLUGo(out, h, g, s)
}

// Norm sets y = ((x - m) * inv) * w + b element-wise (layer norm's map with
// the row's mean m and inverse deviation inv).
func Norm(y, x, w, b []float32, m, inv float32) {
	x, w, b = x[:len(y)], w[:len(y)], b[:len(y)]
	if n := wide8(len(y)); n > 0 {
		normAVX2(&y[0], &x[0], &w[0], &b[0], n, m, inv)
		y, x, w, b = y[n:], x[n:], w[n:], b[n:]
	}
	normGo(y, x, w, b, m, inv)
}

// BNDx sets d = k * (g - a - (x - m) * c): batch norm's input gradient for
// output gradient g, with k = gamma * invstd, a = mean(g), c = invstd *
// mean(g xhat).
func BNDx(d, g, x []float32, k, a, m, c float32) {
	g, x = g[:len(d)], x[:len(d)]
	if n := wide8(len(d)); n > 0 {
		bnDxAVX2(&d[0], &g[0], &x[0], n, k, a, m, c)
		d, g, x = d[n:], g[n:], x[n:]
	}
	bnDxGo(d, g, x, k, a, m, c)
}

// BNDxPos is BNDx with g masked to 0 where o is zero: the input gradient
// of ReLU(batch norm(x)) given the ReLU's output o.
func BNDxPos(d, g, x, o []float32, k, a, m, c float32) {
	g, x, o = g[:len(d)], x[:len(d)], o[:len(d)]
	if n := wide8(len(d)); n > 0 {
		bnDxPosAVX2(&d[0], &g[0], &x[0], &o[0], n, k, a, m, c)
		d, g, x, o = d[n:], g[n:], x[n:], o[n:]
	}
	bnDxPosGo(d, g, x, o, k, a, m, c)
}

// Max returns the largest element of x (len(x) >= 1).
func Max(x []float32) float32 {
	n := wide8(len(x))
	if n == 0 {
		return maxGo(x)
	}
	m := maxAVX2(&x[0], n)
	if n < len(x) {
		m = max(m, maxGo(x[n:]))
	}
	return m
}

// Sum returns the sum of x.
func Sum(x []float32) float32 {
	var s float32
	if n := wide8(len(x)); n > 0 {
		s = sumAVX2(&x[0], n)
		x = x[n:]
	}
	return s + sumGo(x)
}

// Dot returns the sum of x[i] * y[i].
func Dot(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	if n := wide8(len(x)); n > 0 {
		s = dotAVX2(&x[0], &y[0], n)
		x, y = x[n:], y[n:]
	}
	return s + dotGo(x, y)
}

// SumSqDev returns the sum of (x[i] - m)^2.
func SumSqDev(x []float32, m float32) float32 {
	var s float32
	if n := wide8(len(x)); n > 0 {
		s = sumSqDevAVX2(&x[0], n, m)
		x = x[n:]
	}
	return s + sumSqDevGo(x, m)
}

// GradSums returns the sums of g and of g (x - m): batch norm's per-row
// sums for the gradients of beta and gamma.
func GradSums(g, x []float32, m float32) (sg, sgx float32) {
	x = x[:len(g)]
	if n := wide8(len(g)); n > 0 {
		sg, sgx = gradSumsAVX2(&g[0], &x[0], n, m)
		g, x = g[n:], x[n:]
	}
	a, b := gradSumsGo(g, x, m)
	return sg + a, sgx + b
}

// GradSumsPos is GradSums with g masked to 0 where o is zero (ReLU after
// batch norm, o its output).
func GradSumsPos(g, x, o []float32, m float32) (sg, sgx float32) {
	x, o = x[:len(g)], o[:len(g)]
	if n := wide8(len(g)); n > 0 {
		sg, sgx = gradSumsPosAVX2(&g[0], &x[0], &o[0], n, m)
		g, x, o = g[n:], x[n:], o[n:]
	}
	a, b := gradSumsPosGo(g, x, o, m)
	return sg + a, sgx + b
}

// MatVecAdd adds x W to y (W: len(x) rows of len(y) columns, row-major).
func MatVecAdd(x, w, y []float32) {
	in, out := len(x), len(y)
	if hasAVX2 && out%8 == 0 && in > 0 && out > 0 {
		_ = w[in*out-1]
		matvecAVX2(&x[0], in, &w[0], out, &y[0])
		return
	}
	matVecAddGo(x, w, y)
}
