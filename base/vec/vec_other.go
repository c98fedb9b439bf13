//go:build !amd64 || purego

package vec

// This build has no vector kernels: every routine is its portable loop
// (vec.go), with the contracts stated in vec_amd64.go.

// Gelu applies GELU (tanh form, GPT-2's) in place.
func Gelu(x []float32) { geluGo(x) }

// GeluDeriv sets y = gelu(x) and d = gelu'(x).
func GeluDeriv(y, d, x []float32) { geluDerivGo(y, d[:len(y)], x[:len(y)]) }

// Exp replaces x[i] by e^x[i], arguments clamped below at -87.
func Exp(x []float32) { expGo(x) }

// Add sets d = x + y.
func Add(d, x, y []float32) { addGo(d, x, y) }

// Mul sets d = x * y element-wise.
func Mul(d, x, y []float32) { mulGo(d, x, y) }

// Affine sets y = x*a + b.
func Affine(y, x []float32, a, b float32) { affineGo(y, x, a, b) }

// AffineReLU sets y = max(x*a + b, 0); NaN passes.
func AffineReLU(y, x []float32, a, b float32) { affineReLUGo(y, x, a, b) }

// MaskPos sets d = g where o is not zero, else 0.
func MaskPos(d, g, o []float32) { maskPosGo(d, g, o) }

// GateReLU sets out = max(h*g + s, 0) element-wise; NaN passes.
func GateReLU(out, h, g, s []float32) { gateReLUGo(out, h, g, s) }

// Norm sets y = ((x - m) * inv) * w + b element-wise.
func Norm(y, x, w, b []float32, m, inv float32) { normGo(y, x, w, b, m, inv) }

// BNDx sets d = k * (g - a - (x - m) * c).
func BNDx(d, g, x []float32, k, a, m, c float32) { bnDxGo(d, g, x, k, a, m, c) }

// BNDxPos is BNDx with g masked to 0 where o is zero.
func BNDxPos(d, g, x, o []float32, k, a, m, c float32) { bnDxPosGo(d, g, x, o, k, a, m, c) }

// Max returns the largest element of x (len(x) >= 1).
func Max(x []float32) float32 { return maxGo(x) }

// Sum returns the sum of x.
func Sum(x []float32) float32 { return sumGo(x) }

// Dot returns the sum of x[i] * y[i].
func Dot(x, y []float32) float32 { return dotGo(x, y) }

// SumSqDev returns the sum of (x[i] - m)^2.
func SumSqDev(x []float32, m float32) float32 { return sumSqDevGo(x, m) }

// GradSums returns the sums of g and of g (x - m).
func GradSums(g, x []float32, m float32) (sg, sgx float32) { return gradSumsGo(g, x, m) }

// GradSumsPos is GradSums with g masked to 0 where o is zero.
func GradSumsPos(g, x, o []float32, m float32) (sg, sgx float32) { return gradSumsPosGo(g, x, o, m) }

// MatVecAdd adds x W to y (W: len(x) rows of len(y) columns, row-major).
func MatVecAdd(x, w, y []float32) { matVecAddGo(x, w, y) }
