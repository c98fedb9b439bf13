//go:build amd64 && !purego

package engine

import "golang.org/x/sys/cpu"

// hasAVX2 selects the vectorised GELU and exp (vmath_amd64.s).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// geluAVX2 applies GELU (tanh form) in place to x[0:n]; n % 8 == 0.
//
//go:noescape
func geluAVX2(x *float32, n int)

// expAVX2 replaces x[0:n] by exp(x[i]), arguments clamped to [-87, 87];
// n % 8 == 0.
//
//go:noescape
func expAVX2(x *float32, n int)

// geluTanh applies GELU with the tanh approximation (Hendrycks & Gimpel,
// 2016), as GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place.
func geluTanh(x []float32) {
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
