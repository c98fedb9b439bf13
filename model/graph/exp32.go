package graph

import "math"

// exp32s sets x[i] = e^x[i], within one float32 ulp of float32(math.Exp)
// and almost always equal to it (TestExp32): x = k ln2 + r with |r| <=
// ln2/2, e^r by its Taylor polynomial of degree 8 in float64 (truncation
// error < 3e-10 relative), scaled by 2^k through the exponent bits. It
// saturates to +Inf above ~88.7 and to 0 below ~-103.9, as float32 does. A
// leaf loop without calls: math.Exp's call in an elementwise loop forces
// every live value through the stack.
func exp32s(x []float32) {
	const (
		magic = 6755399441055744.0 // 1.5 * 2^52: adding it rounds to an integer
		log2e = 1.4426950408889634
		ln2   = 0.6931471805599453
	)
	for i, v := range x {
		xd := float64(v)
		if xd > 89 { // beyond: float32 overflow / underflow already
			xd = 89
		} else if xd < -104 {
			xd = -104
		}
		kd := xd*log2e + magic // round(x log2 e) in the low bits
		kb := math.Float64bits(kd)
		r := xd - (kd-magic)*ln2
		// e^r, Taylor to degree 8 by Estrin's scheme (shorter dependency
		// chains than Horner's).
		r2 := r * r
		r4 := r2 * r2
		p := (1 + r) + r2*(1.0/2+r*(1.0/6)) + r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040))+r4*(1.0/40320))
		x[i] = float32(p * math.Float64frombits((kb+1023-magicBits)<<52))
	}
}

// magicBits is the bit pattern of exp32s's rounding constant 1.5 * 2^52
// (biased exponent 1075, top mantissa bit set): after adding the constant,
// the bits of a float64 are magicBits + k for the rounded integer k.
const magicBits = 0x4338000000000000

// exp32 is exp32s for one value.
func exp32(x float32) float32 {
	a := [1]float32{x}
	exp32s(a[:])
	return a[0]
}
