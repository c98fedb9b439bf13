package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"rgcpred/internal/sgemm"
)

// conv1d is a one-dimensional convolution without bias: x [B, Cin, L],
// w [Cout, Cin, K] -> y [B, Cout, Lout], Lout = (L + 2 pad - K)/stride + 1.
// It runs as im2col + SGEMM per window (Chellapilla et al., "High
// performance convolutional neural networks for document processing",
// 2006), with the batch split over the worker goroutines.
type conv1d struct {
	stride, pad int
	par         parallel
	cols        [][]float32 // per-worker im2col buffers
	dws         [][]float32 // per-worker weight-gradient accumulators
}

func (c *conv1d) name() string { return fmt.Sprintf("conv1d(s%d,p%d)", c.stride, c.pad) }

func (c *conv1d) diffWRT() []bool { return []bool{true, true} }

func (c *conv1d) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || len(in[0]) != 3 || len(in[1]) != 3 {
		return nil, fmt.Errorf("want x [B,Cin,L] and w [Cout,Cin,K], got %v", in)
	}
	x, w := in[0], in[1]
	if x[1] != w[1] {
		return nil, fmt.Errorf("input has %d channels, kernel expects %d", x[1], w[1])
	}
	lout := (x[2]+2*c.pad-w[2])/c.stride + 1
	if lout < 1 {
		return nil, fmt.Errorf("input length %d too short for kernel %d", x[2], w[2])
	}
	return tensor.Shape{x[0], w[0], lout}, nil
}

type convDims struct{ b, cin, l, cout, k, lout int }

func (c *conv1d) dims(x, w *tensor.Dense) convDims {
	xs, ws := x.Shape(), w.Shape()
	return convDims{xs[0], xs[1], xs[2], ws[0], ws[2], (xs[2]+2*c.pad-ws[2])/c.stride + 1}
}

// direct reports whether the window itself is the im2col matrix (1x1, stride 1).
func (c *conv1d) direct(d convDims) bool { return d.k == 1 && c.stride == 1 && c.pad == 0 }

func (c *conv1d) scratch(bufs *[][]float32, n int) {
	if len(*bufs) < c.par.n {
		*bufs = make([][]float32, max(c.par.n, 1))
	}
	for i := range *bufs {
		if len((*bufs)[i]) < n {
			(*bufs)[i] = make([]float32, n)
		}
	}
}

// im2col writes col [Cin*K, Lout] for one window x [Cin, L].
func (c *conv1d) im2col(d convDims, x, col []float32) {
	for ci := 0; ci < d.cin; ci++ {
		xr := x[ci*d.l : (ci+1)*d.l]
		for k := 0; k < d.k; k++ {
			row := col[(ci*d.k+k)*d.lout : (ci*d.k+k+1)*d.lout]
			off := k - c.pad
			if c.stride == 1 {
				// Valid range of j: 0 <= j+off < L.
				lo, hi := max(0, -off), min(d.lout, d.l-off)
				for j := 0; j < lo && j < d.lout; j++ {
					row[j] = 0
				}
				if hi > lo {
					copy(row[lo:hi], xr[lo+off:hi+off])
				}
				for j := max(hi, 0); j < d.lout; j++ {
					row[j] = 0
				}
				continue
			}
			for j := range row {
				p := j*c.stride + off
				if p >= 0 && p < d.l {
					row[j] = xr[p]
				} else {
					row[j] = 0
				}
			}
		}
	}
}

// col2im accumulates col [Cin*K, Lout] into dx [Cin, L] (dx is zeroed first).
func (c *conv1d) col2im(d convDims, col, dx []float32) {
	clear(dx)
	for ci := 0; ci < d.cin; ci++ {
		xr := dx[ci*d.l : (ci+1)*d.l]
		for k := 0; k < d.k; k++ {
			row := col[(ci*d.k+k)*d.lout : (ci*d.k+k+1)*d.lout]
			off := k - c.pad
			for j, v := range row {
				p := j*c.stride + off
				if p >= 0 && p < d.l {
					xr[p] += v
				}
			}
		}
	}
}

func (c *conv1d) forward(in []*tensor.Dense, out []float32) {
	d := c.dims(in[0], in[1])
	x, w := f32(in[0]), f32(in[1])
	ck := d.cin * d.k
	if !c.direct(d) {
		c.scratch(&c.cols, ck*d.lout)
	}
	c.par.run(d.b, func(lo, hi, wk int) {
		for b := lo; b < hi; b++ {
			xb := x[b*d.cin*d.l : (b+1)*d.cin*d.l]
			col := xb
			if !c.direct(d) {
				col = c.cols[wk][:ck*d.lout]
				c.im2col(d, xb, col)
			}
			sgemm.Gemm(false, false, d.cout, d.lout, ck, 1, w, ck, col, d.lout, 0, out[b*d.cout*d.lout:], d.lout)
		}
	})
}

func (c *conv1d) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	d := c.dims(in[0], in[1])
	x, w := f32(in[0]), f32(in[1])
	ck := d.cin * d.k
	if i == 0 { // dx = col2im(W^T gy)
		direct := c.direct(d)
		if !direct {
			c.scratch(&c.cols, ck*d.lout)
		}
		c.par.run(d.b, func(lo, hi, wk int) {
			for b := lo; b < hi; b++ {
				gy := gout[b*d.cout*d.lout : (b+1)*d.cout*d.lout]
				dx := gin[b*d.cin*d.l : (b+1)*d.cin*d.l]
				if direct {
					sgemm.Gemm(true, false, ck, d.lout, d.cout, 1, w, ck, gy, d.lout, 0, dx, d.lout)
					continue
				}
				col := c.cols[wk][:ck*d.lout]
				sgemm.Gemm(true, false, ck, d.lout, d.cout, 1, w, ck, gy, d.lout, 0, col, d.lout)
				c.col2im(d, col, dx)
			}
		})
		return
	}
	// dW = sum over windows of gy col^T.
	direct := c.direct(d)
	if !direct {
		c.scratch(&c.cols, ck*d.lout)
	}
	c.scratch(&c.dws, d.cout*ck)
	nw := min(max(c.par.n, 1), d.b)
	c.par.run(d.b, func(lo, hi, wk int) {
		dw := c.dws[wk][:d.cout*ck]
		clear(dw)
		for b := lo; b < hi; b++ {
			xb := x[b*d.cin*d.l : (b+1)*d.cin*d.l]
			col := xb
			if !direct {
				col = c.cols[wk][:ck*d.lout]
				c.im2col(d, xb, col)
			}
			gy := gout[b*d.cout*d.lout : (b+1)*d.cout*d.lout]
			sgemm.Gemm(false, true, d.cout, ck, d.lout, 1, gy, d.lout, col, d.lout, 1, dw, ck)
		}
	})
	copy(gin, c.dws[0][:d.cout*ck])
	for wk := 1; wk < nw; wk++ {
		for j, v := range c.dws[wk][:d.cout*ck] {
			gin[j] += v
		}
	}
}

// batchNorm normalises x [B, C, L] per channel (Ioffe & Szegedy, "Batch
// normalization", 2015): inputs x, gamma [C], beta [C], running_mean [C],
// running_var [C]. In training it uses the batch statistics and updates the
// running statistics in place (momentum, unbiased variance, as PyTorch);
// otherwise it uses the running statistics.
type batchNorm struct {
	training bool
	eps      float64
	momentum float64
	par      parallel
	mean     []float64
	invstd   []float64

	// The statistics of the last forward pass are reused by the backward
	// passes of the same run (gorgonia runs a node's forward before any of
	// its gradients); gen counts forward passes, and the per-channel
	// gradient sums are computed once per pass for the three gradients.
	gen, sumGen int
	sdy, sdyx   []float64
}

func (bn *batchNorm) name() string {
	if bn.training {
		return "batchnorm(train)"
	}
	return "batchnorm(eval)"
}

func (bn *batchNorm) diffWRT() []bool { return []bool{true, true, true, false, false} }

func (bn *batchNorm) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 5 || len(in[0]) != 3 {
		return nil, fmt.Errorf("want x [B,C,L] and 4 per-channel vectors, got %v", in)
	}
	for _, s := range in[1:] {
		if len(s) != 1 || s[0] != in[0][1] {
			return nil, fmt.Errorf("per-channel vector of shape %v for %d channels", s, in[0][1])
		}
	}
	return in[0].Clone(), nil
}

// stats computes the per-channel mean and inverse standard deviation used
// for normalisation: of the batch in training, else the running ones.
func (bn *batchNorm) stats(in []*tensor.Dense, update bool) (nb, c, l int) {
	s := in[0].Shape()
	nb, c, l = s[0], s[1], s[2]
	if len(bn.mean) != c {
		bn.mean, bn.invstd = make([]float64, c), make([]float64, c)
	}
	x := f32(in[0])
	rm, rv := f32(in[3]), f32(in[4])
	if !bn.training {
		for ch := 0; ch < c; ch++ {
			bn.mean[ch] = float64(rm[ch])
			bn.invstd[ch] = 1 / math.Sqrt(float64(rv[ch])+bn.eps)
		}
		return
	}
	n := float64(nb * l)
	bn.par.run(c, func(lo, hi, _ int) {
		for ch := lo; ch < hi; ch++ {
			// Row sums in float32 (rows are at most a few hundred bins),
			// accumulated over rows in float64.
			var s, ss float64
			for b := 0; b < nb; b++ {
				var rs float32
				for _, v := range x[(b*c+ch)*l : (b*c+ch+1)*l] {
					rs += v
				}
				s += float64(rs)
			}
			m := s / n
			mf := float32(m)
			for b := 0; b < nb; b++ {
				var rs float32
				for _, v := range x[(b*c+ch)*l : (b*c+ch+1)*l] {
					dv := v - mf
					rs += dv * dv
				}
				ss += float64(rs)
			}
			v := ss / n
			bn.mean[ch] = m
			bn.invstd[ch] = 1 / math.Sqrt(v+bn.eps)
			if update {
				unb := v
				if n > 1 {
					unb = ss / (n - 1)
				}
				rm[ch] = float32((1-bn.momentum)*float64(rm[ch]) + bn.momentum*m)
				rv[ch] = float32((1-bn.momentum)*float64(rv[ch]) + bn.momentum*unb)
			}
		}
	})
	return
}

func (bn *batchNorm) forward(in []*tensor.Dense, out []float32) {
	nb, c, l := bn.stats(in, true)
	bn.gen++
	x, g, be := f32(in[0]), f32(in[1]), f32(in[2])
	bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			ch := r % c
			sc := float32(bn.invstd[ch]) * g[ch]
			sh := be[ch] - float32(bn.mean[ch])*sc
			xr, yr := x[r*l:(r+1)*l], out[r*l:(r+1)*l]
			for j, v := range xr {
				yr[j] = v*sc + sh
			}
		}
	})
}

func (bn *batchNorm) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	bn.backwardWith(i, in, gout, gin)
}

// sums computes, once per forward pass, the per-channel sums of dy and of
// dy * xhat (the gradients of beta and gamma).
func (bn *batchNorm) sums(x, gout []float32, nb, c, l int) {
	if bn.sumGen == bn.gen && len(bn.sdy) == c {
		return
	}
	bn.sumGen = bn.gen
	if len(bn.sdy) != c {
		bn.sdy, bn.sdyx = make([]float64, c), make([]float64, c)
	}
	bn.par.run(c, func(lo, hi, _ int) {
		for ch := lo; ch < hi; ch++ {
			m, is := float32(bn.mean[ch]), bn.invstd[ch]
			var sdy, sdyx float64
			for b := 0; b < nb; b++ {
				r := (b*c + ch) * l
				xr := x[r : r+l]
				var a1, a2 float32
				for j, v := range gout[r : r+l] {
					a1 += v
					a2 += v * (xr[j] - m)
				}
				sdy += float64(a1)
				sdyx += float64(a2) * is
			}
			bn.sdy[ch], bn.sdyx[ch] = sdy, sdyx
		}
	})
}

// backwardWith computes gradient i from the output gradient gout, with the
// statistics of the last forward pass.
func (bn *batchNorm) backwardWith(i int, in []*tensor.Dense, gout, gin []float32) {
	s := in[0].Shape()
	nb, c, l := s[0], s[1], s[2]
	x, g := f32(in[0]), f32(in[1])
	bn.sums(x, gout, nb, c, l)
	switch i {
	case 2: // dbeta
		for ch := range gin {
			gin[ch] = float32(bn.sdy[ch])
		}
		return
	case 1: // dgamma = sum gy * xhat
		for ch := range gin {
			gin[ch] = float32(bn.sdyx[ch])
		}
		return
	}
	if !bn.training { // running statistics are constants
		bn.par.run(nb*c, func(lo, hi, _ int) {
			for r := lo; r < hi; r++ {
				ch := r % c
				sc := float32(bn.invstd[ch]) * g[ch]
				for j, v := range gout[r*l : (r+1)*l] {
					gin[r*l+j] = v * sc
				}
			}
		})
		return
	}
	// dx = gamma*invstd/N * (N dy - sum dy - xhat sum(dy xhat)).
	n := float64(nb * l)
	bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			ch := r % c
			m, is := float32(bn.mean[ch]), float32(bn.invstd[ch])
			k := g[ch] * is
			a, bb := float32(bn.sdy[ch]/n), float32(bn.sdyx[ch]/n)
			xr, gr := x[r*l:(r+1)*l], gin[r*l:(r+1)*l]
			for j, v := range gout[r*l : (r+1)*l] {
				gr[j] = k * (v - a - (xr[j]-m)*is*bb)
			}
		}
	})
}

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
		var s float32
		for _, v := range x[r*l : (r+1)*l] {
			s += v
		}
		out[r] = s / float32(l)
	}
}
func (meanLen) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	l := in[0].Shape()[2]
	for r, g := range gout {
		v := g / float32(l)
		for j := r * l; j < (r+1)*l; j++ {
			gin[j] = v
		}
	}
}

// chanScale multiplies x [B, C, L] by a per-window, per-channel scale s
// [B, C] (the excite of squeeze-and-excite).
type chanScale struct{}

func (chanScale) name() string    { return "chanscale" }
func (chanScale) diffWRT() []bool { return []bool{true, true} }
func (chanScale) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || len(in[0]) != 3 || len(in[1]) != 2 || in[0][0] != in[1][0] || in[0][1] != in[1][1] {
		return nil, fmt.Errorf("want x [B,C,L] and s [B,C], got %v", in)
	}
	return in[0].Clone(), nil
}
func (chanScale) forward(in []*tensor.Dense, out []float32) {
	l := in[0].Shape()[2]
	x, s := f32(in[0]), f32(in[1])
	for r, sv := range s {
		for j := r * l; j < (r+1)*l; j++ {
			out[j] = x[j] * sv
		}
	}
}
func (chanScale) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	l := in[0].Shape()[2]
	x, s := f32(in[0]), f32(in[1])
	if i == 0 {
		for r, sv := range s {
			for j := r * l; j < (r+1)*l; j++ {
				gin[j] = gout[j] * sv
			}
		}
		return
	}
	for r := range s {
		var a float32
		for j := r * l; j < (r+1)*l; j++ {
			a += gout[j] * x[j]
		}
		gin[r] = a
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
type relu struct{ par parallel }

func (relu) name() string    { return "relu" }
func (relu) diffWRT() []bool { return []bool{true} }
func (relu) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("want one input, got %v", in)
	}
	return in[0].Clone(), nil
}
func (r relu) forward(in []*tensor.Dense, out []float32) {
	x := f32(in[0])
	r.par.run(len(x), func(lo, hi, _ int) {
		for i, v := range x[lo:hi] {
			out[lo+i] = max(v, 0)
		}
	})
}
func (r relu) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	x := f32(in[0])
	r.par.run(len(x), func(lo, hi, _ int) {
		for i, v := range x[lo:hi] {
			if v > 0 {
				gin[lo+i] = gout[lo+i]
			} else {
				gin[lo+i] = 0
			}
		}
	})
}

// bnReLU is ReLU(batchNorm(x)) in one pass over memory: the two are
// memory-bound on the encoder's large activations. Inputs as batchNorm.
type bnReLU struct {
	bn      batchNorm
	gbuf    []float32 // output gradient masked by the ReLU
	maskGen int
}

func (k *bnReLU) name() string    { return k.bn.name() + "+relu" }
func (k *bnReLU) diffWRT() []bool { return k.bn.diffWRT() }
func (k *bnReLU) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return k.bn.outShape(in)
}

func (k *bnReLU) forward(in []*tensor.Dense, out []float32) {
	nb, c, l := k.bn.stats(in, true)
	k.bn.gen++
	x, g, be := f32(in[0]), f32(in[1]), f32(in[2])
	k.bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			ch := r % c
			sc := float32(k.bn.invstd[ch]) * g[ch]
			sh := be[ch] - float32(k.bn.mean[ch])*sc
			xr, yr := x[r*l:(r+1)*l], out[r*l:(r+1)*l]
			for j, v := range xr {
				yr[j] = max(v*sc+sh, 0)
			}
		}
	})
}

// backward masks the output gradient where the normalised value is not
// positive (recomputed from x, once per forward pass), then applies batch
// norm's backward.
func (k *bnReLU) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	if k.maskGen != k.bn.gen || len(k.gbuf) != len(gout) {
		k.maskGen = k.bn.gen
		s := in[0].Shape()
		nb, c, l := s[0], s[1], s[2]
		x, g, be := f32(in[0]), f32(in[1]), f32(in[2])
		if len(k.gbuf) != len(gout) {
			k.gbuf = make([]float32, len(gout))
		}
		gm := k.gbuf
		k.bn.par.run(nb*c, func(lo, hi, _ int) {
			for r := lo; r < hi; r++ {
				ch := r % c
				sc := float32(k.bn.invstd[ch]) * g[ch]
				sh := be[ch] - float32(k.bn.mean[ch])*sc
				xr := x[r*l : (r+1)*l]
				for j, v := range gout[r*l : (r+1)*l] {
					if xr[j]*sc+sh > 0 {
						gm[r*l+j] = v
					} else {
						gm[r*l+j] = 0
					}
				}
			}
		})
	}
	k.bn.backwardWith(i, in, k.gbuf, gin)
}
