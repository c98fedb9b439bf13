package graph

import (
	"fmt"

	"rgcpred/base/sgemm"

	"gorgonia.org/tensor"
)

// conv1d is a one-dimensional convolution without bias: x [B, Cin, L],
// w [Cout, Cin, K] -> y [B, Cout, Lout], Lout = (L + 2 pad - K)/stride + 1.
// Kernels wider than one tap run the forward pass and the data gradient
// channels-last, the window read in place as its own im2col matrix (see
// kernels_convcl.go); the weight gradient and the 1x1 convolutions run as
// im2col + SGEMM per window (Chellapilla et al., "High performance
// convolutional neural networks for document processing", 2006). The batch
// is split over the worker goroutines.
type conv1d struct {
	stride, pad int
	par         parallel
	cols        [][]float32      // per-worker im2col buffers
	phs         [][]float32      // per-worker stride-phase buffers (see polyphase)
	dws         [][]float32      // per-worker accumulators of the transposed weight gradient
	wt          []float32        // the weights reordered for a GEMM
	gemm        *gemmTeam        // packing space per worker (nil: sgemm's pool)
	work        [][]float32      // per-worker packing space of the channels-last passes
	pf          *sgemm.PackedB   // the forward pass's packed weights (channels-last)
	pd          []*sgemm.PackedB // the data gradient's packed taps, per stride residue

	// The bodies of the parallel sections (see body).
	fwdRows convFwdRows
	dxRows  convDxRows
	dwRows  convDwRows
	fwdCL   convFwdCL
	dxCL    convDxCL
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
	if c.channelsLast(d) {
		c.forwardCL(d, x, w, out)
		return
	}
	ck := d.cin * d.k
	if !c.direct(d) {
		c.scratch(&c.cols, ck*d.lout)
		c.scratch(&c.phs, c.stride*c.phaseLen(d))
	}
	c.gemm.reserve(c.par.n)
	c.fwdRows = convFwdRows{c: c, d: d, x: x, w: w, out: out}
	c.par.run(d.b, &c.fwdRows)
}

// convFwdRows is the parallel section of the forward pass by im2col: y =
// W col per window.
type convFwdRows struct {
	c         *conv1d
	d         convDims
	x, w, out []float32
}

func (j *convFwdRows) chunk(lo, hi, wk int) {
	c, d, x, w, out := j.c, j.d, j.x, j.w, j.out
	ck := d.cin * d.k
	for b := lo; b < hi; b++ {
		xb := x[b*d.cin*d.l : (b+1)*d.cin*d.l]
		col := xb
		if !c.direct(d) {
			col = c.cols[wk][:ck*d.lout]
			c.im2col(d, xb, col, c.phs[wk])
		}
		c.gemm.on(wk, false, false, d.cout, d.lout, ck, 1, w, ck, col, d.lout, 0, out[b*d.cout*d.lout:], d.lout)
	}
}

// backward computes, per window, dx = col2im(W^T gy) with W^T transposed
// once per call (so that SGEMM reads it in place instead of packing it for
// every window), and dW^T += col gy^T (col read in place; only gy is
// packed) or, when col is the smaller matrix, dW += gy col^T, summed over
// the workers at the end.
func (c *conv1d) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	d := c.dims(in[0], in[1])
	x, w := f32(in[0]), f32(in[1])
	if i == 0 && c.channelsLast(d) {
		c.backwardDataCL(d, w, gout, gin)
		return
	}
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
		sgemm.Transpose(d.cout, ck, w, ck, wt, d.cout)
		c.gemm.reserve(c.par.n)
		c.dxRows = convDxRows{c: c, d: d, wt: wt, gout: gout, gin: gin, direct: direct}
		c.par.run(d.b, &c.dxRows)
		return
	}
	// dW^T = sum over windows of col gy^T, when gy is the smaller matrix to
	// pack; otherwise dW = sum of gy col^T.
	c.scratch(&c.dws, d.cout*ck)
	nw := min(max(c.par.n, 1), d.b)
	tr := d.cout <= ck
	c.gemm.reserve(c.par.n)
	c.dwRows = convDwRows{c: c, d: d, x: x, gout: gout, direct: direct, tr: tr}
	c.par.run(d.b, &c.dwRows)
	if !tr {
		copy(gin, c.dws[0][:d.cout*ck])
		for wk := 1; wk < nw; wk++ {
			add32(gin[:d.cout*ck], c.dws[wk])
		}
		return
	}
	dw := c.dws[0][:d.cout*ck] // dW^T [Cin*K, Cout]
	for wk := 1; wk < nw; wk++ {
		add32(dw, c.dws[wk])
	}
	sgemm.Transpose(ck, d.cout, dw, d.cout, gin, ck)
}

// convDxRows is the parallel section of the data gradient by im2col: dx =
// col2im(W^T gy) per window, W^T in wt.
type convDxRows struct {
	c             *conv1d
	d             convDims
	wt, gout, gin []float32
	direct        bool
}

func (j *convDxRows) chunk(lo, hi, wk int) {
	c, d, wt, gout, gin := j.c, j.d, j.wt, j.gout, j.gin
	ck := d.cin * d.k
	for b := lo; b < hi; b++ {
		gy := gout[b*d.cout*d.lout : (b+1)*d.cout*d.lout]
		dx := gin[b*d.cin*d.l : (b+1)*d.cin*d.l]
		if j.direct {
			c.gemm.on(wk, false, false, ck, d.lout, d.cout, 1, wt, d.cout, gy, d.lout, 0, dx, d.lout)
			continue
		}
		col := c.cols[wk][:ck*d.lout]
		c.gemm.on(wk, false, false, ck, d.lout, d.cout, 1, wt, d.cout, gy, d.lout, 0, col, d.lout)
		c.col2im(d, col, dx, c.phs[wk])
	}
}

// convDwRows is the parallel section of the weight gradient: worker wk
// sums its windows' col gy^T (tr) or gy col^T into its accumulator.
type convDwRows struct {
	c          *conv1d
	d          convDims
	x, gout    []float32
	direct, tr bool
}

func (j *convDwRows) chunk(lo, hi, wk int) {
	c, d, x, gout := j.c, j.d, j.x, j.gout
	ck := d.cin * d.k
	dw := c.dws[wk][:d.cout*ck]
	clear(dw)
	for b := lo; b < hi; b++ {
		xb := x[b*d.cin*d.l : (b+1)*d.cin*d.l]
		col := xb
		if !j.direct {
			col = c.cols[wk][:ck*d.lout]
			c.im2col(d, xb, col, c.phs[wk])
		}
		gy := gout[b*d.cout*d.lout : (b+1)*d.cout*d.lout]
		if j.tr {
			c.gemm.on(wk, false, true, ck, d.cout, d.lout, 1, col, d.lout, gy, d.lout, 1, dw, d.cout)
		} else {
			c.gemm.on(wk, false, true, d.cout, ck, d.lout, 1, gy, d.lout, col, d.lout, 1, dw, ck)
		}
	}
}
