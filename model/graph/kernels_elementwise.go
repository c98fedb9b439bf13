package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"rgcpred/base/vec"
)

// meanLen averages x [B, C, L] over its length: [B, C] (the squeeze of
// squeeze-and-excite, Hu et al., "Squeeze-and-excitation networks", 2018).
type meanLen struct{}

func (meanLen) name() string    { return "meanlen" }
func (meanLen) diffWRT() []bool { return []bool{true} }
func (meanLen) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 || len(in[0]) != 3 {
		return nil, fmt.Errorf("want x [B,C,L], got %v", in)
	}
	return tensor.Shape{in[0][0], in[0][1]}, nil
}
func (meanLen) forward(in []*tensor.Dense, out []float32) {
	l := in[0].Shape()[2]
	x := f32(in[0])
	for r := range out {
		out[r] = vec.Sum(x[r*l:(r+1)*l]) / float32(l)
	}
}
func (meanLen) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	l := in[0].Shape()[2]
	if l == 0 {
		return
	}
	for r, g := range gout {
		row := gin[r*l : (r+1)*l]
		row[0] = g / float32(l)
		for k := 1; k < l; k *= 2 { // fill by doubling copies (memmove)
			copy(row[k:], row[:k])
		}
	}
}

// exciteAdd is x s + sc: x [B, C, L] scaled per window and channel by the
// squeeze-excite gate s [B, C], plus the shortcut sc [B, C, L]; rows split
// over the workers. One kernel instead of a scaling and an addition; the
// block's ReLU follows it.
type exciteAdd struct {
	par parallel
	fwd exciteRows // the bodies of the parallel sections (see body)
	bwd exciteGrad
}

func (*exciteAdd) name() string    { return "exciteadd" }
func (*exciteAdd) diffWRT() []bool { return []bool{true, true, true} }
func (*exciteAdd) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 3 || len(in[0]) != 3 || len(in[1]) != 2 || in[0][0] != in[1][0] || in[0][1] != in[1][1] || !in[2].Eq(in[0]) {
		return nil, fmt.Errorf("want x [B,C,L], s [B,C] and sc [B,C,L], got %v", in)
	}
	return in[0].Clone(), nil
}
func (e *exciteAdd) forward(in []*tensor.Dense, out []float32) {
	x, s := f32(in[0]), f32(in[1])
	e.fwd = exciteRows{d: out, x: x, s: s, sc: f32(in[2]), l: len(x) / len(s)}
	e.par.run(len(s), &e.fwd)
}

// backward passes the output gradient to sc as it is, to x scaled by s,
// and to s as its dot product with x over each row.
func (e *exciteAdd) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	x, s := f32(in[0]), f32(in[1])
	e.bwd = exciteGrad{i: i, d: gin, g: gout, x: x, s: s, l: len(x) / len(s)}
	e.par.run(len(s), &e.bwd)
}

// exciteRows sets rows r of d (length l) to x s[r] + sc.
type exciteRows struct {
	d, x, s, sc []float32
	l           int
}

func (j *exciteRows) chunk(lo, hi, _ int) {
	l := j.l
	for r := lo; r < hi; r++ {
		d := j.d[r*l : (r+1)*l]
		vec.Affine(d, j.x[r*l:(r+1)*l], j.s[r], 0)
		vec.Add(d, d, j.sc[r*l:(r+1)*l])
	}
}

// exciteGrad sets rows r of d to exciteAdd's gradient of input i, given
// the output gradient g.
type exciteGrad struct {
	i          int
	d, g, x, s []float32
	l          int
}

func (j *exciteGrad) chunk(lo, hi, _ int) {
	l := j.l
	for r := lo; r < hi; r++ {
		g := j.g[r*l : (r+1)*l]
		switch j.i {
		case 0:
			vec.Affine(j.d[r*l:(r+1)*l], g, j.s[r], 0)
		case 1:
			j.d[r] = vec.Dot(g, j.x[r*l:(r+1)*l])
		default:
			copy(j.d[r*l:(r+1)*l], g)
		}
	}
}

// softplus is log(1 + e^x), a smooth stand-in for ReLU in gradient checks.
type softplus struct{}

func (softplus) name() string    { return "softplus" }
func (softplus) diffWRT() []bool { return []bool{true} }
func (softplus) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("want one input, got %v", in)
	}
	return in[0].Clone(), nil
}
func (softplus) forward(in []*tensor.Dense, out []float32) {
	for i, v := range f32(in[0]) {
		x := float64(v)
		out[i] = float32(math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))))
	}
}
func (softplus) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	for i, v := range f32(in[0]) {
		gin[i] = gout[i] / float32(1+math.Exp(-float64(v)))
	}
}

// relu is max(x, 0); the gradient passes where the input is positive.
type relu struct {
	par parallel
	fwd reluRange // the bodies of the parallel sections (see body)
	bwd maskRange
}

func (*relu) name() string    { return "relu" }
func (*relu) diffWRT() []bool { return []bool{true} }
func (*relu) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("want one input, got %v", in)
	}
	return in[0].Clone(), nil
}
func (r *relu) forward(in []*tensor.Dense, out []float32) {
	r.fwd = reluRange{d: out, x: f32(in[0])}
	r.par.run(len(r.fwd.x), &r.fwd)
}

// backward passes the gradient where the forward output is positive.
func (r *relu) backward(_ int, in []*tensor.Dense, out, gout, gin []float32) {
	r.bwd = maskRange{d: gin, x: gout, y: out}
	r.par.run(len(gin), &r.bwd)
}

// reluRange sets d = max(x, 0).
type reluRange struct{ d, x []float32 }

func (j *reluRange) chunk(lo, hi, _ int) { vec.AffineReLU(j.d[lo:hi], j.x[lo:hi], 1, 0) }

// maskRange sets d = x where y is positive, else 0.
type maskRange struct{ d, x, y []float32 }

func (j *maskRange) chunk(lo, hi, _ int) { vec.MaskPos(j.d[lo:hi], j.x[lo:hi], j.y[lo:hi]) }

// sigmoid is 1/(1 + e^-x) (the gate of squeeze-and-excite); the backward
// pass takes the derivative y (1 - y) from the forward output.
type sigmoid struct{}

func (sigmoid) name() string    { return "sigmoid" }
func (sigmoid) diffWRT() []bool { return []bool{true} }
func (sigmoid) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("want one input, got %v", in)
	}
	return in[0].Clone(), nil
}
func (sigmoid) forward(in []*tensor.Dense, out []float32) {
	for i, v := range f32(in[0]) {
		out[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
}
func (sigmoid) backward(_ int, _ []*tensor.Dense, out, gout, gin []float32) {
	for i, y := range out {
		gin[i] = gout[i] * y * (1 - y)
	}
}
