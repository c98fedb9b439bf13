package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"rgcpred/base/vec"
)

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

	// The bodies of the parallel sections (see body).
	statRows bnStatRows
	normRows bnNormRows
	sumRows  bnSumRows
	dxRows   bnDxRows
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
	bn.statRows = bnStatRows{x: x, ra: ra, rb: rb, l: l}
	bn.par.run(nb*c, &bn.statRows)
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
	bn.normRows = bnNormRows{bn: bn, x: x, out: out, c: c, l: l, relu: relu}
	bn.par.run(nb*c, &bn.normRows)
}

// bnStatRows is the parallel section of batchStats: each row's sum and sum
// of squares about its mean.
type bnStatRows struct {
	x, ra, rb []float32
	l         int
}

func (j *bnStatRows) chunk(lo, hi, _ int) {
	x, ra, rb, l := j.x, j.ra, j.rb, j.l
	for r := lo; r < hi; r++ {
		xr := x[r*l : (r+1)*l]
		s := vec.Sum(xr)
		ra[r], rb[r] = s, vec.SumSqDev(xr, s/float32(l))
	}
}

// bnNormRows is the parallel section of forwardAct: each row through its
// channel's affine map, and ReLU when relu is set.
type bnNormRows struct {
	bn     *batchNorm
	x, out []float32
	c, l   int
	relu   bool
}

func (j *bnNormRows) chunk(lo, hi, _ int) {
	bn, x, out, c, l := j.bn, j.x, j.out, j.c, j.l
	for r := lo; r < hi; r++ {
		sc, sh := bn.scale[r%c], bn.shift[r%c]
		if j.relu {
			vec.AffineReLU(out[r*l:(r+1)*l], x[r*l:(r+1)*l], sc, sh)
		} else {
			vec.Affine(out[r*l:(r+1)*l], x[r*l:(r+1)*l], sc, sh)
		}
	}
}

func (bn *batchNorm) backward(i int, in []*tensor.Dense, out, gout, gin []float32) {
	bn.backwardAct(i, in, out, gout, gin, false)
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
	bn.sumRows = bnSumRows{bn: bn, x: x, out: out, gout: gout, ra: ra, rb: rb, c: c, l: l, relu: relu}
	bn.par.run(nb*c, &bn.sumRows)
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
	bn.dxRows = bnDxRows{bn: bn, x: x, g: g, out: out, gout: gout, gin: gin, c: c, l: l, n: n, relu: relu}
	bn.par.run(nb*c, &bn.dxRows)
}

// bnSumRows is the parallel section of sums: each row's sums of dy and of
// dy (x - mean), dy masked where out is not positive when relu is set.
type bnSumRows struct {
	bn                   *batchNorm
	x, out, gout, ra, rb []float32
	c, l                 int
	relu                 bool
}

func (j *bnSumRows) chunk(lo, hi, _ int) {
	bn, x, out, gout, ra, rb, c, l := j.bn, j.x, j.out, j.gout, j.ra, j.rb, j.c, j.l
	for r := lo; r < hi; r++ {
		m := float32(bn.mean[r%c])
		gr, xr := gout[r*l:(r+1)*l], x[r*l:(r+1)*l]
		if j.relu {
			ra[r], rb[r] = vec.GradSumsPos(gr, xr, out[r*l:(r+1)*l], m)
		} else {
			ra[r], rb[r] = vec.GradSums(gr, xr, m)
		}
	}
}

// bnDxRows is the parallel section of backwardAct: each row's input
// gradient.
type bnDxRows struct {
	bn                   *batchNorm
	x, g, out, gout, gin []float32
	c, l                 int
	n                    float64 // values per channel
	relu                 bool
}

func (j *bnDxRows) chunk(lo, hi, _ int) {
	bn, x, g, out, gout, gin, c, l, n, relu := j.bn, j.x, j.g, j.out, j.gout, j.gin, j.c, j.l, j.n, j.relu
	train := bn.training
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
		d, dy, xr := gin[r*l:(r+1)*l], gout[r*l:(r+1)*l], x[r*l:(r+1)*l]
		switch {
		case train && relu:
			vec.BNDxPos(d, dy, xr, or, k, a, m, is*bb)
		case train:
			vec.BNDx(d, dy, xr, k, a, m, is*bb)
		case relu:
			vec.MaskPos(d, dy, or)
			vec.Affine(d, d, k, 0)
		default:
			vec.Affine(d, dy, k, 0)
		}
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
