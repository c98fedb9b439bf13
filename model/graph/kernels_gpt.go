package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"rgcpred/base/vec"
)

// linear is y = x W + b for x [N, in], W [in, out], b [out], its GEMMs
// split over the worker goroutines by rows of the result (gemm; nil runs
// them on the calling goroutine).
type linear struct{ gemm *gemmTeam }

func (linear) name() string    { return "linear" }
func (linear) diffWRT() []bool { return []bool{true, true, true} }
func (linear) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 3 || len(in[0]) != 2 || len(in[1]) != 2 || len(in[2]) != 1 || in[0][1] != in[1][0] || in[1][1] != in[2][0] {
		return nil, fmt.Errorf("want x [N,in], W [in,out], b [out], got %v", in)
	}
	return tensor.Shape{in[0][0], in[1][1]}, nil
}
func (l linear) forward(in []*tensor.Dense, out []float32) {
	n, k, m := in[0].Shape()[0], in[1].Shape()[0], in[1].Shape()[1]
	b := f32(in[2])
	for r := 0; r < n; r++ {
		copy(out[r*m:(r+1)*m], b)
	}
	l.gemm.run(false, false, n, m, k, 1, f32(in[0]), k, f32(in[1]), m, 1, out, m)
}
func (l linear) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	n, k, m := in[0].Shape()[0], in[1].Shape()[0], in[1].Shape()[1]
	switch i {
	case 0: // dx = gy W^T
		l.gemm.run(false, true, n, k, m, 1, gout, m, f32(in[1]), m, 0, gin, k)
	case 1: // dW = x^T gy
		l.gemm.run(true, false, k, m, n, 1, f32(in[0]), k, gout, m, 0, gin, m)
	case 2: // db = the column sums of gy, row by row (the order of a scalar loop)
		clear(gin)
		for r := 0; r < n; r++ {
			vec.Add(gin[:m], gin[:m], gout[r*m:(r+1)*m])
		}
	}
}

// toTokens reads the encoder output x [B, C, T] as tokens [B*T, C].
type toTokens struct{}

func (toTokens) name() string    { return "totokens" }
func (toTokens) diffWRT() []bool { return []bool{true} }
func (toTokens) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 || len(in[0]) != 3 {
		return nil, fmt.Errorf("want x [B,C,T], got %v", in)
	}
	return tensor.Shape{in[0][0] * in[0][2], in[0][1]}, nil
}
func (toTokens) forward(in []*tensor.Dense, out []float32) {
	s := in[0].Shape()
	nb, c, t := s[0], s[1], s[2]
	x := f32(in[0])
	for b := 0; b < nb; b++ {
		for ch := 0; ch < c; ch++ {
			for p, v := range x[(b*c+ch)*t : (b*c+ch+1)*t] {
				out[(b*t+p)*c+ch] = v
			}
		}
	}
}
func (toTokens) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	s := in[0].Shape()
	nb, c, t := s[0], s[1], s[2]
	for b := 0; b < nb; b++ {
		for ch := 0; ch < c; ch++ {
			r := gin[(b*c+ch)*t : (b*c+ch+1)*t]
			for p := range r {
				r[p] = gout[(b*t+p)*c+ch]
			}
		}
	}
}

// embed adds the positional embedding pos [T, D] and the cell embedding
// rows cell[idx[b]] ([cells, D]) to the tokens x [B*T, D]; idx [B] holds
// cell indices as float32 (not differentiable).
type embed struct{}

func (embed) name() string    { return "embed" }
func (embed) diffWRT() []bool { return []bool{true, true, true, false} }
func (embed) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 4 || len(in[0]) != 2 || len(in[1]) != 2 || len(in[2]) != 2 || len(in[3]) != 1 ||
		in[0][1] != in[1][1] || in[0][1] != in[2][1] || in[0][0] != in[3][0]*in[1][0] {
		return nil, fmt.Errorf("want x [B*T,D], pos [T,D], cell [N,D], idx [B], got %v", in)
	}
	return in[0].Clone(), nil
}

func cellIndex(v float32, n int) int {
	i := int(v)
	if i < 0 || i >= n {
		panic(fmt.Sprintf("graph: cell index %v out of range [0,%d)", v, n))
	}
	return i
}

func (embed) forward(in []*tensor.Dense, out []float32) {
	t, d := in[1].Shape()[0], in[1].Shape()[1]
	ncell := in[2].Shape()[0]
	x, pos, cell, idx := f32(in[0]), f32(in[1]), f32(in[2]), f32(in[3])
	for b, iv := range idx {
		ce := cell[cellIndex(iv, ncell)*d:][:d]
		for p := 0; p < t; p++ {
			r := (b*t + p) * d
			for j := 0; j < d; j++ {
				out[r+j] = x[r+j] + pos[p*d+j] + ce[j]
			}
		}
	}
}
func (embed) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	t, d := in[1].Shape()[0], in[1].Shape()[1]
	ncell := in[2].Shape()[0]
	idx := f32(in[3])
	switch i {
	case 0:
		copy(gin, gout)
	case 1:
		clear(gin)
		for b := range idx {
			for p := 0; p < t; p++ {
				for j, v := range gout[(b*t+p)*d : (b*t+p+1)*d] {
					gin[p*d+j] += v
				}
			}
		}
	case 2:
		clear(gin)
		for b, iv := range idx {
			ce := gin[cellIndex(iv, ncell)*d:][:d]
			for p := 0; p < t; p++ {
				for j, v := range gout[(b*t+p)*d : (b*t+p+1)*d] {
					ce[j] += v
				}
			}
		}
	}
}

// layerNorm normalises each row of x [N, D] (Ba et al., "Layer
// normalization", 2016) with weight and bias [D], in float32 as the engine
// does; the rows are split over the worker goroutines.
type layerNorm struct {
	eps float64
	par parallel
	// Row statistics of the last forward pass, reused by the backward
	// passes of the same run.
	mean, istd []float32
	tmp        [][]float32 // a row of scratch per worker

	// The bodies of the parallel sections (see body).
	fwdRows lnFwdRows
	dxRows  lnDxRows
}

func (*layerNorm) name() string    { return "layernorm" }
func (*layerNorm) diffWRT() []bool { return []bool{true, true, true} }
func (*layerNorm) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 3 || len(in[0]) != 2 || len(in[1]) != 1 || len(in[2]) != 1 || in[1][0] != in[0][1] || in[2][0] != in[0][1] {
		return nil, fmt.Errorf("want x [N,D], weight [D], bias [D], got %v", in)
	}
	return in[0].Clone(), nil
}

// rowStats returns a row's mean and inverse standard deviation.
func (ln *layerNorm) rowStats(r []float32) (m, is float32) {
	m = vec.Sum(r) / float32(len(r))
	v := vec.SumSqDev(r, m) / float32(len(r))
	return m, float32(1 / math.Sqrt(float64(v)+ln.eps))
}

// stats returns row r's statistics: saved by the forward pass, or
// recomputed when there was none for this shape.
func (ln *layerNorm) stats(x []float32, r, d int) (m, is float32) {
	if len(ln.mean) == len(x)/d {
		return ln.mean[r], ln.istd[r]
	}
	return ln.rowStats(x[r*d : (r+1)*d])
}

// scratch makes a row of d floats per worker.
func (ln *layerNorm) scratch(d int) {
	n := max(ln.par.n, 1)
	if len(ln.tmp) != n || len(ln.tmp[0]) != d {
		ln.tmp = make([][]float32, n)
		for i := range ln.tmp {
			ln.tmp[i] = make([]float32, d)
		}
	}
}

func (ln *layerNorm) forward(in []*tensor.Dense, out []float32) {
	d := in[0].Shape()[1]
	x, g, b := f32(in[0]), f32(in[1]), f32(in[2])
	n := len(x) / d
	if len(ln.mean) != n {
		ln.mean, ln.istd = make([]float32, n), make([]float32, n)
	}
	ln.fwdRows = lnFwdRows{ln: ln, x: x, g: g, b: b, out: out, d: d}
	ln.par.run(n, &ln.fwdRows)
}

// lnFwdRows is the parallel section of layerNorm's forward pass: each row's
// statistics, saved, and its normalised output.
type lnFwdRows struct {
	ln           *layerNorm
	x, g, b, out []float32
	d            int
}

func (j *lnFwdRows) chunk(lo, hi, _ int) {
	ln, x, g, b, out, d := j.ln, j.x, j.g, j.b, j.out, j.d
	for r := lo; r < hi; r++ {
		xr := x[r*d : (r+1)*d]
		m, is := ln.rowStats(xr)
		ln.mean[r], ln.istd[r] = m, is
		vec.Norm(out[r*d:(r+1)*d], xr, g, b, m, is)
	}
}

// backward: dbeta = sum over rows of dy; dgamma = sum of dy xhat; dx = is
// (dxh - mean(dxh) - xhat mean(dxh xhat)) with dxh = dy gamma, which is
// batch norm's input gradient per row (vec.BNDx).
func (ln *layerNorm) backward(i int, in []*tensor.Dense, _, gout, gin []float32) {
	d := in[0].Shape()[1]
	x, g := f32(in[0]), f32(in[1])
	n := len(x) / d
	ln.scratch(d)
	switch i {
	case 2:
		clear(gin)
		for r := 0; r < n; r++ {
			vec.Add(gin, gin, gout[r*d:(r+1)*d])
		}
	case 1:
		clear(gin)
		xh := ln.tmp[0]
		for r := 0; r < n; r++ {
			m, is := ln.stats(x, r, d)
			vec.Affine(xh, x[r*d:(r+1)*d], is, -m*is)
			vec.Mul(xh, xh, gout[r*d:(r+1)*d])
			vec.Add(gin, gin, xh)
		}
	case 0:
		ln.dxRows = lnDxRows{ln: ln, x: x, g: g, gout: gout, gin: gin, d: d}
		ln.par.run(n, &ln.dxRows)
	}
}

// lnDxRows is the parallel section of layerNorm's input gradient, row by
// row, worker w's scratch row holding dy gamma.
type lnDxRows struct {
	ln              *layerNorm
	x, g, gout, gin []float32
	d               int
}

func (j *lnDxRows) chunk(lo, hi, w int) {
	ln, x, g, gout, gin, d := j.ln, j.x, j.g, j.gout, j.gin, j.d
	dxh := ln.tmp[w]
	for r := lo; r < hi; r++ {
		xr := x[r*d : (r+1)*d]
		m, is := ln.stats(x, r, d)
		vec.Mul(dxh, gout[r*d:(r+1)*d], g)
		a, bb := vec.GradSums(dxh, xr, m)
		fd := float32(d)
		vec.BNDx(gin[r*d:(r+1)*d], dxh, xr, is, a/fd, m, is*is*bb/fd)
	}
}

// attention is causal multi-head self-attention (Vaswani et al., 2017;
// GPT-2, Radford et al., 2019) on qkv [B*T, 3D] with columns [q | k | v]
// and head h owning columns h*hd .. (h+1)*hd of each; output [B*T, D],
// before the output projection. Scores are scaled by 1/sqrt(hd).
//
// With last set, only each window's last query is attended: output [B, D].
// The training loss reads the last token alone, so in the last transformer
// block every other token's query, projection and MLP feed nothing, and
// their gradients are zero; the engine skips them for the same reason.
type attention struct {
	t, heads, hd int
	last         bool
	par          parallel
	probs        [][]float32 // per-worker T x T scratch
	dprobs       [][]float32

	gemm *gemmTeam // packing space per worker (nil: sgemm's pool)

	// saved holds the probabilities [B][heads][rows()][T] of the last forward
	// pass, which the backward pass of the same run reuses instead of
	// recomputing them.
	saved []float32

	// The bodies of the parallel sections (see body).
	fwdWin  attnFwdWindows
	bwdWin  attnBwdWindows
	lastFwd attnLastFwd
	lastBwd attnLastBwd
}

func (a *attention) name() string {
	if a.last {
		return fmt.Sprintf("attention(t%d,h%d,d%d,last)", a.t, a.heads, a.hd)
	}
	return fmt.Sprintf("attention(t%d,h%d,d%d)", a.t, a.heads, a.hd)
}
func (a *attention) diffWRT() []bool { return []bool{true} }
func (a *attention) outShape(in []tensor.Shape) (tensor.Shape, error) {
	d := a.heads * a.hd
	if len(in) != 1 || len(in[0]) != 2 || in[0][1] != 3*d || in[0][0]%a.t != 0 {
		return nil, fmt.Errorf("want qkv [B*%d,%d], got %v", a.t, 3*d, in)
	}
	if a.last {
		return tensor.Shape{in[0][0] / a.t, d}, nil
	}
	return tensor.Shape{in[0][0], d}, nil
}

// rows is the number of query rows per window and head: T, or 1 with last.
func (a *attention) rows() int {
	if a.last {
		return 1
	}
	return a.t
}

func (a *attention) scratch() {
	n := max(a.par.n, 1)
	if len(a.probs) < n {
		a.probs, a.dprobs = make([][]float32, n), make([][]float32, n)
		for i := range a.probs {
			a.probs[i] = make([]float32, a.t*a.t)
			a.dprobs[i] = make([]float32, a.t*a.t)
		}
	}
}

// probsOf fills p [T-q0, T] with the causal attention probabilities of
// window b, head h, for the queries q0..T-1: softmax over j <= i of
// (q_i . k_j) / sqrt(hd), by SGEMM on the strided q and k columns. q0 is 0
// for every query and T-1 for the last one alone.
func (a *attention) probsOf(w int, qkv []float32, b, h, q0 int, p []float32) {
	d := a.heads * a.hd
	base := b * a.t * 3 * d
	scale := float32(1 / math.Sqrt(float64(a.hd)))
	nq := a.t - q0
	a.gemm.on(w, false, true, nq, a.t, a.hd, scale, qkv[base+q0*3*d+h*a.hd:], 3*d, qkv[base+d+h*a.hd:], 3*d, 0, p, a.t)
	vec.SoftmaxCausal(p, nq, a.t, q0)
}

func (a *attention) forward(in []*tensor.Dense, out []float32) {
	a.scratch()
	qkv := f32(in[0])
	d := a.heads * a.hd
	nb := len(qkv) / (a.t * 3 * d)
	tt := a.rows() * a.t
	if len(a.saved) != nb*a.heads*tt {
		a.saved = make([]float32, nb*a.heads*tt)
	}
	a.gemm.reserve(a.par.n)
	if a.last {
		a.lastFwd = attnLastFwd{a: a, qkv: qkv, out: out}
		a.par.run(nb, &a.lastFwd)
		return
	}
	a.fwdWin = attnFwdWindows{a: a, qkv: qkv, out: out}
	a.par.run(nb, &a.fwdWin)
}

// attnFwdWindows is the parallel section of attention's forward pass, by
// windows: each head's probabilities, saved, and its output P V.
type attnFwdWindows struct {
	a        *attention
	qkv, out []float32
}

func (j *attnFwdWindows) chunk(lo, hi, w int) {
	a, qkv, out := j.a, j.qkv, j.out
	d := a.heads * a.hd
	tt := a.t * a.t
	for b := lo; b < hi; b++ {
		for h := 0; h < a.heads; h++ {
			p := a.saved[(b*a.heads+h)*tt : (b*a.heads+h+1)*tt]
			a.probsOf(w, qkv, b, h, 0, p)
			// O = P V
			a.gemm.on(w, false, false, a.t, a.hd, a.t, 1, p, a.t, qkv[b*a.t*3*d+2*d+h*a.hd:], 3*d, 0, out[b*a.t*d+h*a.hd:], d)
		}
	}
}

func (a *attention) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	a.scratch()
	qkv := f32(in[0])
	d := a.heads * a.hd
	nb := len(qkv) / (a.t * 3 * d)
	scale := float32(1 / math.Sqrt(float64(a.hd)))
	tt := a.rows() * a.t
	saved := len(a.saved) == nb*a.heads*tt // else no forward pass yet
	a.gemm.reserve(a.par.n)
	if a.last {
		a.lastBwd = attnLastBwd{a: a, qkv: qkv, gout: gout, gin: gin, scale: scale, saved: saved}
		a.par.run(nb, &a.lastBwd)
		return
	}
	a.bwdWin = attnBwdWindows{a: a, qkv: qkv, gout: gout, gin: gin, scale: scale, saved: saved}
	a.par.run(nb, &a.bwdWin)
}

// attnBwdWindows is the parallel section of attention's backward pass, by
// windows; saved tells whether the forward pass's probabilities are there
// to reuse.
type attnBwdWindows struct {
	a              *attention
	qkv, gout, gin []float32
	scale          float32
	saved          bool
}

func (j *attnBwdWindows) chunk(lo, hi, w int) {
	a, qkv, gout, gin, scale := j.a, j.qkv, j.gout, j.gin, j.scale
	d := a.heads * a.hd
	tt := a.t * a.t
	dp := a.dprobs[w]
	for b := lo; b < hi; b++ {
		base, obase := b*a.t*3*d, b*a.t*d
		for h := 0; h < a.heads; h++ {
			q, k, v := base+h*a.hd, base+d+h*a.hd, base+2*d+h*a.hd
			do := gout[obase+h*a.hd:]
			p := a.probs[w]
			if j.saved {
				p = a.saved[(b*a.heads+h)*tt : (b*a.heads+h+1)*tt]
			} else {
				a.probsOf(w, qkv, b, h, 0, p)
			}
			// dV = P^T dO; dP = dO V^T
			a.gemm.on(w, true, false, a.t, a.hd, a.t, 1, p, a.t, do, d, 0, gin[v:], 3*d)
			a.gemm.on(w, false, true, a.t, a.t, a.hd, 1, do, d, qkv[v:], 3*d, 0, dp, a.t)
			// dS = P (dP - rowsum(P dP)) / sqrt(hd), in place in dp.
			for i := 0; i < a.t; i++ {
				pr, dr := p[i*a.t:(i+1)*a.t], dp[i*a.t:(i+1)*a.t]
				softmaxGrad(dr[:i+1], pr[:i+1], scale)
				clear(dr[i+1:])
			}
			// dQ = dS K; dK = dS^T Q
			a.gemm.on(w, false, false, a.t, a.hd, a.t, 1, dp, a.t, qkv[k:], 3*d, 0, gin[q:], 3*d)
			a.gemm.on(w, true, false, a.t, a.hd, a.t, 1, dp, a.t, qkv[q:], 3*d, 0, gin[k:], 3*d)
		}
	}
}

// softmaxGrad sets dp to the gradient of the scores under one query's
// probabilities p, given dp, the gradient of p, and the scores' scale:
// p (dp - p . dp) scale.
func softmaxGrad(dp, p []float32, scale float32) {
	vec.Affine(dp, dp, scale, -vec.Dot(p, dp)*scale)
	vec.Mul(dp, p, dp)
}

// attnLastFwd is the parallel section of the last-query forward pass, by
// windows, with attnFwdWindows' fields: each head's probabilities [T],
// saved, and its output p V.
type attnLastFwd attnFwdWindows

func (j *attnLastFwd) chunk(lo, hi, w int) {
	a, qkv, out := j.a, j.qkv, j.out
	d := a.heads * a.hd
	for b := lo; b < hi; b++ {
		for h := 0; h < a.heads; h++ {
			p := a.saved[(b*a.heads+h)*a.t : (b*a.heads+h+1)*a.t]
			a.probsOf(w, qkv, b, h, a.t-1, p)
			a.gemm.on(w, false, false, 1, a.hd, a.t, 1, p, a.t, qkv[b*a.t*3*d+2*d+h*a.hd:], 3*d, 0, out[b*d+h*a.hd:], d)
		}
	}
}

// attnLastBwd is the parallel section of the last-query backward pass, by
// windows, with attnBwdWindows' fields. Every query row but the last gets a
// zero gradient.
type attnLastBwd attnBwdWindows

func (j *attnLastBwd) chunk(lo, hi, w int) {
	a, qkv, gout, gin, scale := j.a, j.qkv, j.gout, j.gin, j.scale
	d := a.heads * a.hd
	dp := a.dprobs[w][:a.t]
	for b := lo; b < hi; b++ {
		base := b * a.t * 3 * d
		clear(gin[base : base+a.t*3*d])
		for h := 0; h < a.heads; h++ {
			q, k, v := base+(a.t-1)*3*d+h*a.hd, base+d+h*a.hd, base+2*d+h*a.hd
			do := gout[b*d+h*a.hd:][:a.hd]
			p := a.probs[w][:a.t]
			if j.saved {
				p = a.saved[(b*a.heads+h)*a.t : (b*a.heads+h+1)*a.t]
			} else {
				a.probsOf(w, qkv, b, h, a.t-1, p)
			}
			// dV = p^T dO (an outer product); dp = dO V^T
			a.gemm.on(w, true, false, a.t, a.hd, 1, 1, p, a.t, do, a.hd, 0, gin[v:], 3*d)
			a.gemm.on(w, false, true, 1, a.t, a.hd, 1, do, a.hd, qkv[v:], 3*d, 0, dp, a.t)
			softmaxGrad(dp, p, scale) // dS
			// dq = dS K; dK = dS^T q
			a.gemm.on(w, false, false, 1, a.hd, a.t, 1, dp, a.t, qkv[k:], 3*d, 0, gin[q:], 3*d)
			a.gemm.on(w, true, false, a.t, a.hd, 1, 1, dp, a.t, qkv[q:], 3*d, 0, gin[k:], 3*d)
		}
	}
}

// gelu is the tanh approximation of the Gaussian error linear unit
// (Hendrycks & Gimpel, 2016), as in GPT-2, split over the worker goroutines.
// The forward pass also stores the local derivative dy/dx, so the backward
// pass (which follows it in the same run) is a product instead of a second
// exponential per element.
type gelu struct {
	par parallel
	dy  []float32 // dy/dx of the last forward pass

	// The bodies of the parallel sections (see body).
	fwd geluRange
	bwd mulRange
}

func (*gelu) name() string    { return "gelu" }
func (*gelu) diffWRT() []bool { return []bool{true} }
func (*gelu) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("want one input, got %v", in)
	}
	return in[0].Clone(), nil
}
func (g *gelu) forward(in []*tensor.Dense, out []float32) {
	x := f32(in[0])
	if len(g.dy) != len(x) {
		g.dy = make([]float32, len(x))
	}
	g.fwd = geluRange{d: out, dy: g.dy, x: x}
	g.par.run(len(x), &g.fwd)
}

func (g *gelu) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	x := f32(in[0])
	if len(g.dy) != len(x) { // no forward pass yet: the derivative, gin as scratch
		g.dy = make([]float32, len(x))
		vec.GeluDeriv(gin, g.dy, x)
	}
	g.bwd = mulRange{d: gin, x: g.dy, y: gout}
	g.par.run(len(x), &g.bwd)
}

// geluRange sets d = gelu(x) and dy = gelu'(x).
type geluRange struct{ d, dy, x []float32 }

func (j *geluRange) chunk(lo, hi, _ int) { vec.GeluDeriv(j.d[lo:hi], j.dy[lo:hi], j.x[lo:hi]) }

// mulRange sets d = x y element-wise.
type mulRange struct{ d, x, y []float32 }

func (j *mulRange) chunk(lo, hi, _ int) { vec.Mul(j.d[lo:hi], j.x[lo:hi], j.y[lo:hi]) }

// lastToken picks the last of every window's T tokens: [B*T, D] -> [B, D].
type lastToken struct{ t int }

func (l lastToken) name() string  { return fmt.Sprintf("lasttoken(%d)", l.t) }
func (lastToken) diffWRT() []bool { return []bool{true} }
func (l lastToken) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 || len(in[0]) != 2 || in[0][0]%l.t != 0 {
		return nil, fmt.Errorf("want x [B*%d,D], got %v", l.t, in)
	}
	return tensor.Shape{in[0][0] / l.t, in[0][1]}, nil
}
func (l lastToken) forward(in []*tensor.Dense, out []float32) {
	d := in[0].Shape()[1]
	x := f32(in[0])
	for b := 0; b < len(out)/d; b++ {
		copy(out[b*d:(b+1)*d], x[((b+1)*l.t-1)*d:][:d])
	}
}
func (l lastToken) backward(_ int, in []*tensor.Dense, _, gout, gin []float32) {
	d := in[0].Shape()[1]
	clear(gin)
	for b := 0; b < len(gout)/d; b++ {
		copy(gin[((b+1)*l.t-1)*d:][:d], gout[b*d:(b+1)*d])
	}
}
