// Package vec is float32 vector arithmetic for the inference engine
// (model/engine) and the training graph (model/graph): element-wise maps,
// sums, the exponential and GELU, causal attention's softmax, and the
// kernels of batch norm's forward and backward passes.
//
// Each routine but SoftmaxCausal (portable Go over the others) is Go
// assembly for AVX2+FMA (GELU also for AVX-512) when the CPU has it
// (detected at start with golang.org/x/sys/cpu), and portable Go otherwise,
// always with the purego build tag, and for the tails shorter than a
// vector. The portable versions are the tests' references (vec_test.go):
//   - element-wise routines without an exponential give the same bits on
//     both paths (the assembly rounds each operation as the Go code does,
//     no fused multiply-adds);
//   - sums add in another order;
//   - Exp, Gelu and GeluDeriv are within stated tolerances of the float64
//     definitions.
//
// Slices are read up to the length of the first (output) slice; the others
// must be at least as long. Nothing allocates.
package vec

import "math"

// GELUCubic is the cubic coefficient of GELU's tanh approximation
// (Hendrycks & Gimpel, 2016), 0.5 x (1 + tanh(sqrt(2/pi) (x + GELUCubic
// x^3))), as GPT-2; the assembly holds it in its constants. model.GELUCubic
// is the same number (a test in model/graph checks it).
const GELUCubic = 0.044715

// geluC is sqrt(2/pi).
const geluC = 0.7978845608028654

// Expf is e^x for float32, accurate to about one ulp (within 3e-7
// relative, TestExpf): x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of
// ln2), e^r from its degree-7 Taylor polynomial (truncation error below
// 1e-8 relative), 2^n put into the exponent bits. Arguments outside [-87, 88]
// (overflow, subnormal results, NaN) take math.Exp.
func Expf(x float32) float32 {
	if !(x >= -87 && x <= 88) {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	y := x * log2e
	var n int32
	if y >= 0 {
		n = int32(y + 0.5)
	} else {
		n = int32(y - 0.5)
	}
	fn := float32(n)
	r := x - float32(fn*ln2hi) - float32(fn*ln2lo)
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(n+127)<<23)
}

// expGo is the portable Exp: arguments clamped below at -87.
func expGo(x []float32) {
	for i, v := range x {
		x[i] = Expf(max(v, -87))
	}
}

// geluGo is the portable Gelu, using tanh(u) = 1 - 2 / (exp(2u) + 1).
func geluGo(x []float32) {
	for i, v := range x {
		u := geluC * (v + GELUCubic*v*v*v)
		t := 1 - 2/(Expf(2*u)+1)
		x[i] = 0.5 * v * (1 + t)
	}
}

// geluDerivGo is the portable GeluDeriv: with e = exp(-2u) (argument
// clamped to [-87, 87]) and s = 1/(1+e), gelu(v) = v s and gelu'(v) = s +
// v s^2 e 2 geluC (1 + 3 GELUCubic v^2), since 0.5 (1 + tanh(u)) = s and
// 1 - tanh(u)^2 = 4 s (1 - s) = 4 s^2 e.
func geluDerivGo(y, d, x []float32) {
	d, x = d[:len(y)], x[:len(y)]
	for i, v := range x {
		v2 := v * v
		a := -v * float32(2*geluC+float32(2*geluC*GELUCubic)*v2)
		e := Expf(min(max(a, -87), 87))
		s := 1 / (1 + e)
		y[i] = v * s
		q := 2*geluC + float32(6*geluC*GELUCubic)*v2
		d[i] = s + float32(float32(v*float32(float32(s*s)*e))*q)
	}
}

func addGo(d, x, y []float32) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

func mulGo(d, x, y []float32) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = x[i] * y[i]
	}
}

func affineGo(y, x []float32, a, b float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] = float32(v*a) + b
	}
}

func affineReLUGo(y, x []float32, a, b float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] = relu(float32(v*a) + b)
	}
}

// relu is 0 where v < 0, else v: NaN passes (a diverging run shows in its
// loss), as does -0; VMAXPS's result with 0 as its first operand.
func relu(v float32) float32 {
	if v < 0 {
		return 0
	}
	return v
}

// posMask is all ones where o is not zero (+0 or -0), else zero: ANDed
// with a gradient's bits it applies ReLU's derivative, given ReLU's output
// o >= 0, without a branch.
func posMask(o float32) uint32 {
	b := math.Float32bits(o) << 1 // -0 as +0
	return uint32(int32(b|-b) >> 31)
}

func maskPosGo(d, g, o []float32) {
	g, o = g[:len(d)], o[:len(d)]
	for i, v := range g {
		d[i] = math.Float32frombits(math.Float32bits(v) & posMask(o[i]))
	}
}

func gateReLUGo(out, h, g, s []float32) {
	h, g, s = h[:len(out)], g[:len(out)], s[:len(out)]
	for i := range out {
		out[i] = relu(float32(h[i]*g[i]) + s[i])
	}
}

func normGo(y, x, w, b []float32, m, inv float32) {
	x, w, b = x[:len(y)], w[:len(y)], b[:len(y)]
	for i, v := range x {
		y[i] = float32(float32((v-m)*inv)*w[i]) + b[i]
	}
}

func bnDxGo(d, g, x []float32, k, a, m, c float32) {
	g, x = g[:len(d)], x[:len(d)]
	for i, v := range g {
		d[i] = k * (v - a - float32((x[i]-m)*c))
	}
}

func bnDxPosGo(d, g, x, o []float32, k, a, m, c float32) {
	g, x, o = g[:len(d)], x[:len(d)], o[:len(d)]
	for i, v := range g {
		v = math.Float32frombits(math.Float32bits(v) & posMask(o[i]))
		d[i] = k * (v - a - float32((x[i]-m)*c))
	}
}

func maxGo(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}

func sumGo(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += v
	}
	return s
}

func dotGo(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	for i, v := range x {
		s += float32(v * y[i])
	}
	return s
}

func sumSqDevGo(x []float32, m float32) float32 {
	var s float32
	for _, v := range x {
		d := v - m
		s += float32(d * d)
	}
	return s
}

func gradSumsGo(g, x []float32, m float32) (sg, sgx float32) {
	x = x[:len(g)]
	for i, v := range g {
		sg += v
		sgx += float32(v * (x[i] - m))
	}
	return sg, sgx
}

func gradSumsPosGo(g, x, o []float32, m float32) (sg, sgx float32) {
	x, o = x[:len(g)], o[:len(g)]
	for i, v := range g {
		v = math.Float32frombits(math.Float32bits(v) & posMask(o[i]))
		sg += v
		sgx += float32(v * (x[i] - m))
	}
	return sg, sgx
}

func matVecAddGo(x, w, y []float32) {
	out := len(y)
	for i, xi := range x {
		row := w[i*out : (i+1)*out]
		for j, v := range row {
			y[j] += xi * v
		}
	}
}
