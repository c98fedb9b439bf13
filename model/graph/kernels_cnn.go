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
	phs         [][]float32 // per-worker stride-phase buffers (see polyphase)
	dws         [][]float32 // per-worker accumulators of the transposed weight gradient
	wt          []float32   // W^T [Cin*K, Cout]
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

// colRange returns the output positions [lo, hi) (0 <= lo <= hi <= lout)
// whose input position j*s + off lies inside [0, l): outside it, im2col
// reads the zero padding.
func colRange(lout, l, s, off int) (lo, hi int) {
	if off < 0 {
		lo = (-off + s - 1) / s
	}
	if l-1-off >= 0 {
		hi = (l-1-off)/s + 1
	}
	lo = min(lo, lout)
	hi = max(min(hi, lout), lo)
	return lo, hi
}

// polyphase reports whether im2col and col2im go through the input's stride
// phases: for a stride s > 1, input row x[ci] is split once into s
// contiguous phases (phase p holds x[ci, m*s + p]); then every im2col row
// is a contiguous copy from one phase (x[ci, j*s + off] is phase off mod s
// at j + floor(off/s)) instead of a strided gather, and col2im adds
// contiguous rows into the phases and interleaves them once. It pays when
// the kernel is wider than the stride (more rows than phases).
func (c *conv1d) polyphase(d convDims) bool { return c.stride > 1 && d.k > c.stride }

// phaseLen is the length of a phase buffer (the longest phase).
func (c *conv1d) phaseLen(d convDims) int { return (d.l + c.stride - 1) / c.stride }

// phaseOf splits a row offset off into the stride phase p (0 <= p < s) and
// the shift fl = floor(off/s), off = fl*s + p.
func phaseOf(off, s int) (p, fl int) {
	fl = off / s
	if off%s < 0 {
		fl--
	}
	return off - fl*s, fl
}

// im2col writes col [Cin*K, Lout] for one window x [Cin, L]: row (ci, k)
// holds x[ci, j*stride + k - pad] at column j, zero in the padding. ph is
// scratch of stride*phaseLen floats when polyphase.
func (c *conv1d) im2col(d convDims, x, col, ph []float32) {
	s := c.stride
	poly := c.polyphase(d)
	np := c.phaseLen(d)
	for ci := 0; ci < d.cin; ci++ {
		xr := x[ci*d.l : (ci+1)*d.l]
		if poly {
			deinterleave(ph, xr, s, np)
		}
		for k := 0; k < d.k; k++ {
			row := col[(ci*d.k+k)*d.lout : (ci*d.k+k+1)*d.lout]
			off := k - c.pad
			lo, hi := colRange(d.lout, d.l, s, off)
			clear(row[:lo])
			clear(row[hi:])
			if hi == lo {
				continue
			}
			dst := row[lo:hi]
			switch {
			case s == 1:
				copy(dst, xr[lo+off:hi+off])
			case poly:
				p, fl := phaseOf(off, s)
				copy(dst, ph[p*np+lo+fl:p*np+hi+fl])
			default:
				src := xr[lo*s+off : (hi-1)*s+off+1]
				for j := range dst {
					dst[j] = src[j*s]
				}
			}
		}
	}
}

// col2im writes dx [Cin, L] = the sum of col [Cin*K, Lout] back at the
// positions im2col read from (its adjoint). ph is scratch as for im2col.
func (c *conv1d) col2im(d convDims, col, dx, ph []float32) {
	s := c.stride
	poly := c.polyphase(d)
	np := c.phaseLen(d)
	if !poly {
		clear(dx)
	}
	for ci := 0; ci < d.cin; ci++ {
		xr := dx[ci*d.l : (ci+1)*d.l]
		if poly {
			clear(ph[:s*np])
		}
		for k := 0; k < d.k; k++ {
			row := col[(ci*d.k+k)*d.lout : (ci*d.k+k+1)*d.lout]
			off := k - c.pad
			lo, hi := colRange(d.lout, d.l, s, off)
			if hi == lo {
				continue
			}
			src := row[lo:hi]
			switch {
			case s == 1:
				add32(xr[lo+off:hi+off], src)
			case poly:
				p, fl := phaseOf(off, s)
				add32(ph[p*np+lo+fl:p*np+hi+fl], src)
			default:
				dst := xr[lo*s+off : (hi-1)*s+off+1]
				for j, v := range src {
					dst[j*s] += v
				}
			}
		}
		if poly {
			interleave(xr, ph, s, np)
		}
	}
}

// deinterleave splits x into its s stride phases: ph[p*np + m] = x[m*s + p].
func deinterleave(ph, x []float32, s, np int) {
	if s == 2 {
		e, o := ph[:np], ph[np:2*np]
		m := 0
		for ; 2*m+1 < len(x); m++ {
			v := x[2*m : 2*m+2 : 2*m+2]
			e[m], o[m] = v[0], v[1]
		}
		if 2*m < len(x) {
			e[m] = x[2*m]
		}
		return
	}
	for p := 0; p < s; p++ {
		dst := ph[p*np : (p+1)*np]
		for m, i := 0, p; i < len(x); m, i = m+1, i+s {
			dst[m] = x[i]
		}
	}
}

// interleave is the inverse of deinterleave: x[m*s + p] = ph[p*np + m].
func interleave(x, ph []float32, s, np int) {
	if s == 2 {
		e, o := ph[:np], ph[np:2*np]
		m := 0
		for ; 2*m+1 < len(x); m++ {
			v := x[2*m : 2*m+2 : 2*m+2]
			v[0], v[1] = e[m], o[m]
		}
		if 2*m < len(x) {
			x[2*m] = e[m]
		}
		return
	}
	for p := 0; p < s; p++ {
		src := ph[p*np : (p+1)*np]
		for m, i := 0, p; i < len(x); m, i = m+1, i+s {
			x[i] = src[m]
		}
	}
}

// add32 sets d += x (x at least as long as d), unrolled by four.
func add32(d, x []float32) {
	x = x[:len(d)]
	j := 0
	for ; j+4 <= len(d); j += 4 {
		dv, xv := d[j:j+4:j+4], x[j:j+4:j+4]
		dv[0] += xv[0]
		dv[1] += xv[1]
		dv[2] += xv[2]
		dv[3] += xv[3]
	}
	for ; j < len(d); j++ {
		d[j] += x[j]
	}
}

func (c *conv1d) forward(in []*tensor.Dense, out []float32) {
	d := c.dims(in[0], in[1])
	x, w := f32(in[0]), f32(in[1])
	ck := d.cin * d.k
	if !c.direct(d) {
		c.scratch(&c.cols, ck*d.lout)
		c.scratch(&c.phs, c.stride*c.phaseLen(d))
	}
	c.par.run(d.b, func(lo, hi, wk int) {
		for b := lo; b < hi; b++ {
			xb := x[b*d.cin*d.l : (b+1)*d.cin*d.l]
			col := xb
			if !c.direct(d) {
				col = c.cols[wk][:ck*d.lout]
				c.im2col(d, xb, col, c.phs[wk])
			}
			sgemm.Gemm(false, false, d.cout, d.lout, ck, 1, w, ck, col, d.lout, 0, out[b*d.cout*d.lout:], d.lout)
		}
	})
}

// backward computes, per window, dx = col2im(W^T gy) with W^T transposed
// once per call (so that SGEMM reads it in place instead of packing it for
// every window), and dW^T += col gy^T (col read in place; only gy is
// packed) or, when col is the smaller matrix, dW += gy col^T, summed over
// the workers at the end.
func (c *conv1d) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	d := c.dims(in[0], in[1])
	x, w := f32(in[0]), f32(in[1])
	ck := d.cin * d.k
	direct := c.direct(d)
	if !direct {
		c.scratch(&c.cols, ck*d.lout)
		c.scratch(&c.phs, c.stride*c.phaseLen(d))
	}
	if i == 0 { // dx = col2im(W^T gy)
		if len(c.wt) < ck*d.cout {
			c.wt = make([]float32, ck*d.cout)
		}
		wt := c.wt[:ck*d.cout]
		for co := 0; co < d.cout; co++ {
			for r, v := range w[co*ck : (co+1)*ck] {
				wt[r*d.cout+co] = v
			}
		}
		c.par.run(d.b, func(lo, hi, wk int) {
			for b := lo; b < hi; b++ {
				gy := gout[b*d.cout*d.lout : (b+1)*d.cout*d.lout]
				dx := gin[b*d.cin*d.l : (b+1)*d.cin*d.l]
				if direct {
					sgemm.Gemm(false, false, ck, d.lout, d.cout, 1, wt, d.cout, gy, d.lout, 0, dx, d.lout)
					continue
				}
				col := c.cols[wk][:ck*d.lout]
				sgemm.Gemm(false, false, ck, d.lout, d.cout, 1, wt, d.cout, gy, d.lout, 0, col, d.lout)
				c.col2im(d, col, dx, c.phs[wk])
			}
		})
		return
	}
	// dW^T = sum over windows of col gy^T, when gy is the smaller matrix to
	// pack; otherwise dW = sum of gy col^T.
	c.scratch(&c.dws, d.cout*ck)
	nw := min(max(c.par.n, 1), d.b)
	tr := d.cout <= ck
	c.par.run(d.b, func(lo, hi, wk int) {
		dw := c.dws[wk][:d.cout*ck]
		clear(dw)
		for b := lo; b < hi; b++ {
			xb := x[b*d.cin*d.l : (b+1)*d.cin*d.l]
			col := xb
			if !direct {
				col = c.cols[wk][:ck*d.lout]
				c.im2col(d, xb, col, c.phs[wk])
			}
			gy := gout[b*d.cout*d.lout : (b+1)*d.cout*d.lout]
			if tr {
				sgemm.Gemm(false, true, ck, d.cout, d.lout, 1, col, d.lout, gy, d.lout, 1, dw, d.cout)
			} else {
				sgemm.Gemm(false, true, d.cout, ck, d.lout, 1, gy, d.lout, col, d.lout, 1, dw, ck)
			}
		}
	})
	if !tr {
		copy(gin, c.dws[0][:d.cout*ck])
		for wk := 1; wk < nw; wk++ {
			add32(gin[:d.cout*ck], c.dws[wk])
		}
		return
	}
	for co := 0; co < d.cout; co++ {
		g := gin[co*ck : (co+1)*ck]
		for r := range g {
			v := c.dws[0][r*d.cout+co]
			for wk := 1; wk < nw; wk++ {
				v += c.dws[wk][r*d.cout+co]
			}
			g[r] = v
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

	scale, shift []float32 // per-channel affine map of the last forward pass
	rowA, rowB   []float32 // per-row partial sums
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

// batchStats sets the per-channel mean and inverse standard deviation of
// the batch and updates the running statistics. One pass over x in memory
// order: each row's sum and sum of squares about the row's own mean (the
// row, at most a few hundred bins, is still in cache for its second loop),
// in float32; the rows of a channel are then combined in float64 (Chan,
// Golub & LeVeque, "Updating formulae and a pairwise algorithm for
// computing sample variances", 1979): M2 = sum of row M2 + l (row mean -
// mean)^2.
func (bn *batchNorm) batchStats(x, rm, rv []float32, nb, c, l int) {
	if len(bn.rowA) != nb*c {
		bn.rowA, bn.rowB = make([]float32, nb*c), make([]float32, nb*c)
	}
	ra, rb := bn.rowA, bn.rowB
	bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			xr := x[r*l : (r+1)*l]
			s := sum32(xr)
			ra[r], rb[r] = s, sqDev32(xr, s/float32(l))
		}
	})
	n := float64(nb * l)
	for ch := 0; ch < c; ch++ {
		var s float64
		for b := 0; b < nb; b++ {
			s += float64(ra[b*c+ch])
		}
		m := s / n
		var ss float64
		for b := 0; b < nb; b++ {
			d := float64(ra[b*c+ch])/float64(l) - m
			ss += float64(rb[b*c+ch]) + float64(l)*d*d
		}
		v := ss / n
		bn.mean[ch] = m
		bn.invstd[ch] = 1 / math.Sqrt(v+bn.eps)
		unb := v
		if n > 1 {
			unb = ss / (n - 1)
		}
		rm[ch] = float32((1-bn.momentum)*float64(rm[ch]) + bn.momentum*m)
		rv[ch] = float32((1-bn.momentum)*float64(rv[ch]) + bn.momentum*unb)
	}
}

func (bn *batchNorm) forward(in []*tensor.Dense, out []float32) {
	bn.forwardAct(in, out, false)
}

// forwardAct normalises x, followed by ReLU when relu is set: the
// statistics (in training), then one pass writing the output. Both passes go
// through memory in order: the rows of one channel are far apart, and
// walking them channel by channel defeats the caches and prefetchers.
func (bn *batchNorm) forwardAct(in []*tensor.Dense, out []float32, relu bool) {
	s := in[0].Shape()
	nb, c, l := s[0], s[1], s[2]
	if len(bn.mean) != c {
		bn.mean, bn.invstd = make([]float64, c), make([]float64, c)
		bn.scale, bn.shift = make([]float32, c), make([]float32, c)
	}
	bn.gen++
	x, g, be, rm, rv := f32(in[0]), f32(in[1]), f32(in[2]), f32(in[3]), f32(in[4])
	if bn.training {
		bn.batchStats(x, rm, rv, nb, c, l)
	} else {
		for ch := 0; ch < c; ch++ {
			bn.mean[ch] = float64(rm[ch])
			bn.invstd[ch] = 1 / math.Sqrt(float64(rv[ch])+bn.eps)
		}
	}
	for ch := 0; ch < c; ch++ {
		sc := float32(bn.invstd[ch]) * g[ch]
		bn.scale[ch], bn.shift[ch] = sc, be[ch]-float32(bn.mean[ch])*sc
	}
	bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			sc, sh := bn.scale[r%c], bn.shift[r%c]
			xr := x[r*l : (r+1)*l]
			affine32(out[r*l:(r+1)*l], xr, sc, sh, relu)
		}
	})
}

func (bn *batchNorm) backward(i int, in []*tensor.Dense, out, gout, gin []float32) {
	bn.backwardAct(i, in, out, gout, gin, false)
}

// relu32 is max(v, 0) without a branch (clears negative values, -0
// included, by their sign bit).
func relu32(v float32) float32 {
	b := math.Float32bits(v)
	return math.Float32frombits(b &^ uint32(int32(b)>>31))
}

// sum32 is the sum of x in float32 with four interleaved accumulators
// (a single running sum is bound by the latency of the additions).
func sum32(x []float32) float32 {
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(x); j += 4 {
		v := x[j : j+4 : j+4]
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
	}
	for ; j < len(x); j++ {
		s0 += x[j]
	}
	return (s0 + s1) + (s2 + s3)
}

// sqDev32 is the sum of (x - m)^2 in float32, four accumulators.
func sqDev32(x []float32, m float32) float32 {
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(x); j += 4 {
		v := x[j : j+4 : j+4]
		d0, d1, d2, d3 := v[0]-m, v[1]-m, v[2]-m, v[3]-m
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; j < len(x); j++ {
		d := x[j] - m
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// gradSums32 returns the sums of dy and of dy (x - m) in float32 (two
// accumulators each), where dy is g, masked where o is not positive when o
// is not nil. x and o are at least as long as g.
func gradSums32(g, x, o []float32, m float32) (sdy, sdyx float32) {
	var a0, a1, b0, b1 float32
	x = x[:len(g)]
	j := 0
	if o != nil {
		o = o[:len(g)]
		for ; j+2 <= len(g); j += 2 {
			gv, xv, ov := g[j:j+2:j+2], x[j:j+2:j+2], o[j:j+2:j+2]
			v0 := math.Float32frombits(math.Float32bits(gv[0]) & posMask(ov[0]))
			v1 := math.Float32frombits(math.Float32bits(gv[1]) & posMask(ov[1]))
			a0 += v0
			a1 += v1
			b0 += v0 * (xv[0] - m)
			b1 += v1 * (xv[1] - m)
		}
		for ; j < len(g); j++ {
			v := math.Float32frombits(math.Float32bits(g[j]) & posMask(o[j]))
			a0 += v
			b0 += v * (x[j] - m)
		}
		return a0 + a1, b0 + b1
	}
	for ; j+2 <= len(g); j += 2 {
		gv, xv := g[j:j+2:j+2], x[j:j+2:j+2]
		a0 += gv[0]
		a1 += gv[1]
		b0 += gv[0] * (xv[0] - m)
		b1 += gv[1] * (xv[1] - m)
	}
	for ; j < len(g); j++ {
		a0 += g[j]
		b0 += g[j] * (x[j] - m)
	}
	return a0 + a1, b0 + b1
}

// posMask is all ones where the forward output o of ReLU is positive, else
// zero: ANDed with a gradient's bits it applies ReLU's derivative without a
// branch (o >= 0, so o > 0 exactly when its bits are not zero).
func posMask(o float32) uint32 {
	b := math.Float32bits(o)
	return uint32(int32(b|-b) >> 31)
}

// sums computes, once per forward pass, the per-channel sums of dy and of
// dy * xhat (the gradients of beta and gamma), where dy is gout, masked
// where the output out is not positive when relu is set: row sums in
// float32 in one pass over memory, combined per channel in float64.
func (bn *batchNorm) sums(x, out, gout []float32, nb, c, l int, relu bool) {
	if bn.sumGen == bn.gen && len(bn.sdy) == c {
		return
	}
	bn.sumGen = bn.gen
	if len(bn.sdy) != c {
		bn.sdy, bn.sdyx = make([]float64, c), make([]float64, c)
	}
	if len(bn.rowA) != nb*c {
		bn.rowA, bn.rowB = make([]float32, nb*c), make([]float32, nb*c)
	}
	ra, rb := bn.rowA, bn.rowB
	bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			m := float32(bn.mean[r%c])
			gr := gout[r*l : (r+1)*l]
			xr := x[r*l : (r+1)*l]
			xr = xr[:len(gr)]
			var or []float32
			if relu {
				or = out[r*l : (r+1)*l]
			}
			ra[r], rb[r] = gradSums32(gr, xr, or, m)
		}
	})
	for ch := 0; ch < c; ch++ {
		var sdy, sdyx float64
		is := bn.invstd[ch]
		for b := 0; b < nb; b++ {
			sdy += float64(ra[b*c+ch])
			sdyx += float64(rb[b*c+ch]) * is
		}
		bn.sdy[ch], bn.sdyx[ch] = sdy, sdyx
	}
}

// backwardAct computes gradient i from the output gradient gout, with the
// statistics of the last forward pass; with relu, gout is masked on the fly
// where the forward output out is not positive (the derivative of the
// fused ReLU).
func (bn *batchNorm) backwardAct(i int, in []*tensor.Dense, out, gout, gin []float32, relu bool) {
	s := in[0].Shape()
	nb, c, l := s[0], s[1], s[2]
	x, g := f32(in[0]), f32(in[1])
	if i != 0 || bn.training {
		bn.sums(x, out, gout, nb, c, l, relu)
	}
	switch i {
	case 2: // dbeta = sum dy
		for ch := range gin {
			gin[ch] = float32(bn.sdy[ch])
		}
		return
	case 1: // dgamma = sum dy * xhat
		for ch := range gin {
			gin[ch] = float32(bn.sdyx[ch])
		}
		return
	}
	// Training: dx = gamma*invstd/N * (N dy - sum dy - xhat sum(dy xhat));
	// otherwise the running statistics are constants: dx = gamma*invstd dy.
	n := float64(nb * l)
	train := bn.training
	bn.par.run(nb*c, func(lo, hi, _ int) {
		for r := lo; r < hi; r++ {
			ch := r % c
			m, is := float32(bn.mean[ch]), float32(bn.invstd[ch])
			k := g[ch] * is
			var a, bb float32
			if train {
				a, bb = float32(bn.sdy[ch]/n), float32(bn.sdyx[ch]/n)
			}
			var or []float32
			if relu {
				or = out[r*l : (r+1)*l]
			}
			if train {
				bnDx32(gin[r*l:(r+1)*l], gout[r*l:(r+1)*l], x[r*l:(r+1)*l], or, k, a, m, is*bb)
			} else {
				scaleMasked32(gin[r*l:(r+1)*l], gout[r*l:(r+1)*l], or, k)
			}
		}
	})
}

// affine32 sets y = x*sc + sh, clamped at 0 when relu is set; unrolled by
// four (a leaf function: the compiler keeps its few values in registers).
func affine32(y, x []float32, sc, sh float32, relu bool) {
	y = y[:len(x)]
	j := 0
	if relu {
		for ; j+4 <= len(x); j += 4 {
			xv, yv := x[j:j+4:j+4], y[j:j+4:j+4]
			yv[0] = relu32(xv[0]*sc + sh)
			yv[1] = relu32(xv[1]*sc + sh)
			yv[2] = relu32(xv[2]*sc + sh)
			yv[3] = relu32(xv[3]*sc + sh)
		}
		for ; j < len(x); j++ {
			y[j] = relu32(x[j]*sc + sh)
		}
		return
	}
	for ; j+4 <= len(x); j += 4 {
		xv, yv := x[j:j+4:j+4], y[j:j+4:j+4]
		yv[0] = xv[0]*sc + sh
		yv[1] = xv[1]*sc + sh
		yv[2] = xv[2]*sc + sh
		yv[3] = xv[3]*sc + sh
	}
	for ; j < len(x); j++ {
		y[j] = x[j]*sc + sh
	}
}

// bnDx32 sets d = k*(dy - a - (x - m)*c) (batch norm's input gradient with
// c = invstd * mean(dy xhat)), where dy is g, masked where o is not
// positive when o is not nil. All slices are at least as long as d.
func bnDx32(d, g, x, o []float32, k, a, m, c float32) {
	g, x = g[:len(d)], x[:len(d)]
	j := 0
	if o != nil {
		o = o[:len(d)]
		for ; j+2 <= len(d); j += 2 {
			dv, gv, xv, ov := d[j:j+2:j+2], g[j:j+2:j+2], x[j:j+2:j+2], o[j:j+2:j+2]
			v0 := math.Float32frombits(math.Float32bits(gv[0]) & posMask(ov[0]))
			v1 := math.Float32frombits(math.Float32bits(gv[1]) & posMask(ov[1]))
			dv[0] = k * (v0 - a - (xv[0]-m)*c)
			dv[1] = k * (v1 - a - (xv[1]-m)*c)
		}
		for ; j < len(d); j++ {
			v := math.Float32frombits(math.Float32bits(g[j]) & posMask(o[j]))
			d[j] = k * (v - a - (x[j]-m)*c)
		}
		return
	}
	for ; j+4 <= len(d); j += 4 {
		dv, gv, xv := d[j:j+4:j+4], g[j:j+4:j+4], x[j:j+4:j+4]
		dv[0] = k * (gv[0] - a - (xv[0]-m)*c)
		dv[1] = k * (gv[1] - a - (xv[1]-m)*c)
		dv[2] = k * (gv[2] - a - (xv[2]-m)*c)
		dv[3] = k * (gv[3] - a - (xv[3]-m)*c)
	}
	for ; j < len(d); j++ {
		d[j] = k * (g[j] - a - (x[j]-m)*c)
	}
}

// scaleMasked32 sets d = k*g, with g masked where o is not positive when o
// is not nil.
func scaleMasked32(d, g, o []float32, k float32) {
	g = g[:len(d)]
	if o != nil {
		o = o[:len(d)]
		for j, v := range g {
			d[j] = math.Float32frombits(math.Float32bits(v)&posMask(o[j])) * k
		}
		return
	}
	for j, v := range g {
		d[j] = v * k
	}
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
		affine32(out[lo:hi], x[lo:hi], 1, 0, true)
	})
}

// backward passes the gradient where the forward output is positive
// (branch-free: the signs are data, not predictable).
func (r relu) backward(_ int, in []*tensor.Dense, out, gout, gin []float32) {
	r.par.run(len(gin), func(lo, hi, _ int) {
		maskPos32(gin[lo:hi], gout[lo:hi], out[lo:hi])
	})
}

// maskPos32 sets d = g where o > 0, else 0 (a leaf function: the bit
// operations inline here, which they do not in closures of value-receiver
// methods called through their pointer wrappers).
func maskPos32(d, g, o []float32) {
	g, o = g[:len(d)], o[:len(d)]
	for i, v := range g {
		d[i] = math.Float32frombits(math.Float32bits(v) & posMask(o[i]))
	}
}

// bnReLU is ReLU(batchNorm(x)) in one pass over memory: the two are
// memory-bound on the encoder's large activations. Inputs as batchNorm.
type bnReLU struct {
	bn batchNorm
}

func (k *bnReLU) name() string    { return k.bn.name() + "+relu" }
func (k *bnReLU) diffWRT() []bool { return k.bn.diffWRT() }
func (k *bnReLU) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return k.bn.outShape(in)
}

func (k *bnReLU) forward(in []*tensor.Dense, out []float32) {
	k.bn.forwardAct(in, out, true)
}

// backward masks the output gradient where the forward output is not
// positive, on the fly, and applies batch norm's backward.
func (k *bnReLU) backward(i int, in []*tensor.Dense, out, gout, gin []float32) {
	k.bn.backwardAct(i, in, out, gout, gin, true)
}
