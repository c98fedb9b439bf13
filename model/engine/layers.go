package engine

import (
	"math"
	"unsafe"

	"rgcpred/base/sgemm"
	"rgcpred/base/vec"
	"rgcpred/model"
)

// conv is a 1-D convolution with batch norm folded in, as a GEMM over
// channels-last activations: out[l, o] = bias[o] + sum over (t, i) of
// in[l*stride + t, i] * w[t*cin + i, o], where in is zero-padded by pad
// positions on both sides.
type conv struct {
	k, stride, pad, cin, cout int
	w                         *sgemm.PackedB    // [k*cin, cout]
	w16                       *sgemm.PackedBF16 // bf16 copy of w; nil: float32 path
	w8                        *sgemm.PackedI8   // int8 copy of w; nil: the float paths
	// taps are int8 copies of w's k taps ([cin, cout] each), for an input
	// quantized with a scale per position; nil: the other paths.
	taps []*sgemm.PackedI8
	bias []float32 // [cout]
}

// newConv folds batch norm prefix (weight, bias, running_mean, running_var)
// into the kernel [cout, cin, k] called name.
func newConv(w *model.Weights, name, bn string, stride int) conv {
	spec := paramSpec(w.Config, name)
	cout, cin, k := spec.Shape[0], spec.Shape[1], spec.Shape[2]
	kern := w.Get(name)
	gamma, beta := w.Get(bn+".weight"), w.Get(bn+".bias")
	mean, vr := w.Get(bn+".running_mean"), w.Get(bn+".running_var")
	b := make([]float32, k*cin*cout)
	bias := make([]float32, cout)
	for o := 0; o < cout; o++ {
		scale := float64(gamma[o]) / math.Sqrt(float64(vr[o])+model.BNEps)
		bias[o] = float32(float64(beta[o]) - float64(mean[o])*scale)
		for i := 0; i < cin; i++ {
			for t := 0; t < k; t++ {
				b[(t*cin+i)*cout+o] = float32(float64(kern[(o*cin+i)*k+t]) * scale)
			}
		}
	}
	return conv{k: k, stride: stride, pad: k / 2, cin: cin, cout: cout,
		w: sgemm.NewPackedB(false, k*cin, cout, b, cout), bias: bias}
}

// apply computes output positions lo..hi from the padded input in (row 0
// is the first padding row) into rows lo..hi of out (row stride cout),
// followed by ReLU when relu is set; bias and ReLU are fused into the
// GEMM's store.
func (c *conv) apply(in []float32, lo, hi int, out []float32, relu bool, work []float32) {
	if hi <= lo {
		return
	}
	c.applyTo(in, lo, hi, out[lo*c.cout:], relu, work)
}

// applyTo is apply with output position lo written to row 0 of dst.
func (c *conv) applyTo(in []float32, lo, hi int, dst []float32, relu bool, work []float32) {
	ld := c.stride * c.cin
	if c.w16 != nil {
		sgemm.GemmPackedBiasBF16(hi-lo, in[lo*ld:], ld, c.w16, c.bias, relu, dst, c.cout, work)
		return
	}
	sgemm.GemmPackedBias(hi-lo, in[lo*ld:], ld, c.w, c.bias, relu, dst, c.cout, work)
}

// ringRun is a run of output positions lo..hi that lands on consecutive
// rows of a ring from row.
type ringRun struct{ lo, hi, row int }

// ringRuns cuts positions lo..hi into the runs they take in a ring of n
// rows whose row base holds position 0 (position o goes to row
// (base+o) mod n): at most two, the second from row 0.
func ringRuns(lo, hi, base, n int) (runs [2]ringRun, k int) {
	wrap := n - base // the first position that wraps to row 0
	if lo < wrap && lo < hi {
		runs[k] = ringRun{lo, min(hi, wrap), base + lo}
		k++
	}
	if hi > wrap {
		a := max(lo, wrap)
		runs[k] = ringRun{a, hi, a - wrap}
		k++
	}
	return runs, k
}

// applyRing is apply into a ring of n rows whose row base holds output
// position 0 (ringRuns).
func (c *conv) applyRing(in []float32, lo, hi int, ring []float32, base, n int, relu bool, work []float32) {
	runs, k := ringRuns(lo, hi, base, n)
	for _, r := range runs[:k] {
		c.applyTo(in, r.lo, r.hi, ring[r.row*c.cout:], relu, work)
	}
}

// quantized is a convolution's input quantized to uint8, laid out as
// apply's in (row 0 the first padding row): position p stands for
// (q[p] - zero[p]) * scale[p], or q[p] * scale[0] for every position when
// perPos is false (no zero points then). Padding positions hold 0, with
// scale and zero point 0.
type quantized struct {
	q      []uint8
	scale  []float32
	zero   []int32
	perPos bool
}

// newQuantized makes room for rows positions of cols channels, with
// room for the GEMM kernels' groups of 4 bytes past the last.
func newQuantized(rows, cols int) quantized {
	return quantized{q: make([]uint8, rows*cols+4), scale: make([]float32, rows),
		zero: make([]int32, rows), perPos: true}
}

// set quantizes positions lo..hi of src (cols floats each, position p at
// src[(p-off)*cols:], off being the rows of padding before src's first)
// each with a scale and zero point of its own.
func (in *quantized) set(src []float32, lo, hi, cols, off int) {
	sgemm.QuantizeRowsU8(in.q[lo*cols:], cols, src[(lo-off)*cols:], cols, hi-lo, cols, in.scale[lo:], in.zero[lo:])
}

// from returns the scales and zero points of the positions first,
// first+stride, ..., with their strides.
func (in *quantized) from(first, stride int) (scale []float32, ss int, zero []int32, zs int) {
	if !in.perPos {
		return in.scale[:1], 0, nil, 0
	}
	return in.scale[first:], stride, in.zero[first:], stride
}

// applyI8 is apply on the int8 path (c.w8) from the quantized input in.
func (c *conv) applyI8(in *quantized, lo, hi int, out []float32, relu bool, work []float32) {
	if hi <= lo {
		return
	}
	c.applyI8To(in, lo, hi, out[lo*c.cout:], relu, work)
}

// applyI8To is applyI8 with output position lo written to row 0 of dst.
func (c *conv) applyI8To(in *quantized, lo, hi int, dst []float32, relu bool, work []float32) {
	ld := c.stride * c.cin
	sa, ss, za, zs := in.from(lo*c.stride, c.stride)
	sgemm.GemmPackedBiasI8(hi-lo, in.q[lo*ld:], ld, sa, ss, za, zs, c.w8, c.bias, relu, dst, c.cout, work)
}

// applyRingI8 is applyI8 into a ring of n rows whose row base holds output
// position 0 (ringRuns).
func (c *conv) applyRingI8(in *quantized, lo, hi int, ring []float32, base, n int, relu bool, work []float32) {
	runs, k := ringRuns(lo, hi, base, n)
	for _, r := range runs[:k] {
		c.applyI8To(in, r.lo, r.hi, ring[r.row*c.cout:], relu, work)
	}
}

// applyTaps is apply on the int8 path tap by tap (c.taps), from an input
// quantized a position at a time: each output row sums the k taps'
// products, each scaled by its input position's scale, so that a row
// depends only on the positions it reads, whatever the others hold.
func (c *conv) applyTaps(in *quantized, lo, hi int, out []float32, relu bool, work []float32) {
	if hi <= lo {
		return
	}
	ld := c.stride * c.cin
	dst := out[lo*c.cout:]
	for t, w := range c.taps {
		a := in.q[(lo*c.stride+t)*c.cin:]
		sa, ss, za, zs := in.from(lo*c.stride+t, c.stride)
		last := relu && t == len(c.taps)-1
		if t == 0 {
			sgemm.GemmPackedBiasI8(hi-lo, a, ld, sa, ss, za, zs, w, c.bias, last, dst, c.cout, work)
			continue
		}
		sgemm.GemmPackedAccI8(hi-lo, a, ld, sa, ss, za, zs, w, last, dst, c.cout, work)
	}
}

// newTaps quantizes c's taps for applyTaps.
func (c *conv) newTaps() []*sgemm.PackedI8 {
	w := c.w.Dense()
	taps := make([]*sgemm.PackedI8, c.k)
	for t := range taps {
		taps[t] = sgemm.NewPackedI8(false, c.cin, c.cout, w[t*c.cin*c.cout:], c.cout)
	}
	return taps
}

// linear is y = x W + b with W [in, out].
type linear struct {
	in, out int
	w       *sgemm.PackedB
	w16     *sgemm.PackedBF16 // bf16 copy of w; nil: float32 path
	w8      *sgemm.PackedI8   // int8 copy of w; nil: the float paths
	bias    []float32
}

func newLinear(w *model.Weights, prefix string) linear {
	spec := paramSpec(w.Config, prefix+".weight")
	in, out := spec.Shape[0], spec.Shape[1]
	return linear{in: in, out: out, w: sgemm.NewPackedB(false, in, out, w.Get(prefix+".weight"), out),
		bias: append([]float32(nil), w.Get(prefix+".bias")...)}
}

// apply computes rows x (rows x in, row stride ldx) into y (rows x out, row
// stride ldy).
func (f *linear) apply(rows int, x []float32, ldx int, y []float32, ldy int, work []float32) {
	if f.w8 != nil {
		f.applyI8(rows, x, ldx, y, ldy, work)
		return
	}
	if f.w16 != nil {
		sgemm.GemmPackedBiasBF16(rows, x, ldx, f.w16, f.bias, false, y, ldy, work)
		return
	}
	sgemm.GemmPackedBias(rows, x, ldx, f.w, f.bias, false, y, ldy, work)
}

// applyI8 is apply on the int8 path: each row of x quantized to uint8
// with a scale and zero point of its own (sgemm.QuantizeRowsU8), in
// work, as many rows at a time as fit there.
func (f *linear) applyI8(rows int, x []float32, ldx int, y []float32, ldy int, work []float32) {
	const tileLen = 12 * 32
	tile, rest := work[:tileLen], work[tileLen:]
	ld := (f.in + 3) &^ 3 // a quantized row: groups of 4 bytes
	block := min(rows, len(rest)/(ld/4+2))
	for lo := 0; lo < rows; lo += block {
		n := min(block, rows-lo)
		q := unsafe.Slice((*uint8)(unsafe.Pointer(&rest[0])), n*ld)
		scale := rest[n*ld/4 : n*ld/4+n]
		zero := unsafe.Slice((*int32)(unsafe.Pointer(&rest[n*ld/4+n])), n)
		sgemm.QuantizeRowsU8(q, ld, x[lo*ldx:], ldx, n, f.in, scale, zero)
		sgemm.GemmPackedBiasI8(n, q, ld, scale, 1, zero, 1, f.w8, f.bias, false, y[lo*ldy:], ldy, tile)
	}
}

// matvec computes y = x W + b for one row with a plain loop (cheaper than a
// GEMM for the tiny squeeze-excite layers).
func (f *linear) matvec(x, y []float32, w []float32) {
	copy(y[:f.out], f.bias)
	vec.MatVecAdd(x[:f.in], w[:f.in*f.out], y[:f.out])
}
