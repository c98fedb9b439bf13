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
	for i, v := range x {
		xd := float64(v)
		if xd > 89 { // beyond: float32 overflow / underflow already
			xd = 89
		} else if xd < -104 {
			xd = -104
		}
		t := xd * 1.4426950408889634 // log2(e)
		k := int64(t + math.Copysign(0.5, t))
		r := xd - float64(k)*0.6931471805599453
		p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
		x[i] = float32(p * math.Float64frombits(uint64(k+1023)<<52))
	}
}

// exp32 is exp32s for one value.
func exp32(x float32) float32 {
	a := [1]float32{x}
	exp32s(a[:])
	return a[0]
}
