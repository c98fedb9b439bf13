package graph

import "rgcpred/base/sgemm"

// Channels-last convolution, as the engine runs it (model/engine): with a
// window transposed to [L, Cin] and zero-padded, the im2col row of output
// position j is the contiguous run of K*Cin floats at row j*stride, so the
// whole im2col matrix is the window itself read with a row stride of
// stride*Cin (rows overlap). sgemm.GemmPacked reads it in place against the
// weights packed once per call; nothing per window is copied but the two
// transposes. The data gradient is a channels-last convolution of the
// output gradient with the flipped, transposed taps, one per stride
// residue of the input position (Dumoulin and Visin, "A guide to
// convolution arithmetic for deep learning", 2016, section 4).

// channelsLast reports whether the forward pass and the data gradient run
// channels-last (every kernel wider than one tap).
func (c *conv1d) channelsLast(d convDims) bool { return d.k > 1 }

// clRows is the number of padded input rows the forward pass reads.
func (c *conv1d) clRows(d convDims) int { return (d.lout-1)*c.stride + d.k }

// clWork sizes the per-worker buffers of the channels-last passes: packing
// space and two matrices of n1 and n2 floats.
func (c *conv1d) clWork(n1, n2 int) {
	c.scratch(&c.work, sgemm.WorkSize())
	c.scratch(&c.cols, n1)
	c.scratch(&c.phs, n2)
}

func (c *conv1d) forwardCL(d convDims, x, w, out []float32) {
	kc := d.k * d.cin
	n := d.cout * kc
	if len(c.wt) < n {
		c.wt = make([]float32, n)
	}
	wr := c.wt[:n] // [Cout][K][Cin]
	for co := 0; co < d.cout; co++ {
		sgemm.Transpose(d.cin, d.k, w[co*kc:], d.k, wr[co*kc:], d.cin)
	}
	c.pf = c.gemm.pack(c.pf, true, kc, d.cout, wr, kc)
	rows := c.clRows(d)
	c.clWork(rows*d.cin, d.lout*d.cout)
	c.fwdCL = convFwdCL{c: c, d: d, x: x, out: out, rows: rows}
	c.par.run(d.b, &c.fwdCL)
}

// convFwdCL is the parallel section of forwardCL: per window, the padded
// window channels-last times the packed weights.
type convFwdCL struct {
	c      *conv1d
	d      convDims
	x, out []float32
	rows   int
}

func (j *convFwdCL) chunk(lo, hi, wk int) {
	c, d, x, out, rows := j.c, j.d, j.x, j.out, j.rows
	xp := c.cols[wk][:rows*d.cin]
	yt := c.phs[wk][:d.lout*d.cout]
	for b := lo; b < hi; b++ {
		toRows(xp, x[b*d.cin*d.l:(b+1)*d.cin*d.l], d.cin, d.l, c.pad, rows)
		c.gemm.scratchA(xp)
		c.gemm.packedA(d.lout, xp, c.stride*d.cin, c.pf, 0, yt, d.cout, c.work[wk])
		fromRows(out[b*d.cout*d.lout:(b+1)*d.cout*d.lout], yt, d.cout, d.lout)
	}
}

// toRows writes x [C, L] channels-last into xp [rows, C] starting at row
// pad, zero elsewhere (input positions at or past rows - pad are not read).
func toRows(xp, x []float32, ch, l, pad, rows int) {
	n := min(l, rows-pad)
	clear(xp[:pad*ch])
	clear(xp[(pad+n)*ch : rows*ch])
	sgemm.Transpose(ch, n, x, l, xp[pad*ch:], ch)
}

// fromRows writes y [C, L] from yt [L, C].
func fromRows(y, yt []float32, ch, l int) { sgemm.Transpose(l, ch, yt, ch, y, l) }

// residue describes the data gradient's taps for input positions
// t = m*stride + r: taps k0, k0+s, ..., q of them; position m reads output
// positions m + c0 - q + 1 .. m + c0; lr positions in all.
type residue struct{ k0, q, c0, lr int }

func (c *conv1d) residue(d convDims, r int) residue {
	s := c.stride
	k0 := (r + c.pad) % s
	q := 0
	if k0 < d.k {
		q = (d.k - k0 + s - 1) / s
	}
	return residue{k0: k0, q: q, c0: (r + c.pad - k0) / s, lr: (d.l - r + s - 1) / s}
}

// backwardDataCL computes dx: per stride residue r, dx_r [Lr, Cin] is the
// output gradient channels-last (zero-padded, read in place with
// overlapping rows) times that residue's taps, flipped. Each dx_r is
// stored with a row stride of stride*Cin at column r*Cin, so that the
// residues together are dx channels-last ([ceil(L/stride)*stride, Cin],
// input position m*stride + r in row m*stride + r), and one transpose
// writes dx.
func (c *conv1d) backwardDataCL(d convDims, w, gout, gin []float32) {
	s := c.stride
	if len(c.pd) < s {
		c.pd = make([]*sgemm.PackedB, s)
	}
	front, end := 0, d.lout
	for r := 0; r < s; r++ {
		rs := c.residue(d, r)
		if rs.q == 0 {
			continue
		}
		front = max(front, rs.q-1-rs.c0)
		end = max(end, rs.lr+rs.c0)
		n := d.cin * rs.q * d.cout
		if len(c.wt) < n {
			c.wt = make([]float32, n)
		}
		br := c.wt[:n] // [Cin][q][Cout], taps flipped
		qc := rs.q * d.cout
		for co := 0; co < d.cout; co++ {
			for ci := 0; ci < d.cin; ci++ {
				wr := w[(co*d.cin+ci)*d.k : (co*d.cin+ci+1)*d.k]
				for qq := 0; qq < rs.q; qq++ {
					br[ci*qc+qq*d.cout+co] = wr[rs.k0+(rs.q-1-qq)*s]
				}
			}
		}
		c.pd[r] = c.gemm.pack(c.pd[r], true, qc, d.cin, br, qc)
	}
	rows := front + end
	lr := (d.l + s - 1) / s
	c.clWork(rows*d.cout, lr*s*d.cin)
	c.dxCL = convDxCL{c: c, d: d, gout: gout, gin: gin, front: front, rows: rows, lr: lr}
	c.par.run(d.b, &c.dxCL)
}

// convDxCL is the parallel section of backwardDataCL: per window, each
// stride residue's dx_r, then one transpose into dx.
type convDxCL struct {
	c               *conv1d
	d               convDims
	gout, gin       []float32
	front, rows, lr int
}

func (j *convDxCL) chunk(lo, hi, wk int) {
	c, d, gout, gin, front, rows, lr := j.c, j.d, j.gout, j.gin, j.front, j.rows, j.lr
	s := c.stride
	gp := c.cols[wk][:rows*d.cout]
	dt := c.phs[wk][:lr*s*d.cin] // dx channels-last
	for b := lo; b < hi; b++ {
		toRows(gp, gout[b*d.cout*d.lout:(b+1)*d.cout*d.lout], d.cout, d.lout, front, rows)
		c.gemm.scratchA(gp)
		for r := 0; r < s; r++ {
			rs := c.residue(d, r)
			if rs.q == 0 {
				for m := 0; m < rs.lr; m++ {
					clear(dt[(m*s+r)*d.cin : (m*s+r+1)*d.cin])
				}
				continue
			}
			a := gp[(front+rs.c0-rs.q+1)*d.cout:]
			c.gemm.packedA(rs.lr, a, d.cout, c.pd[r], 0, dt[r*d.cin:], s*d.cin, c.work[wk])
		}
		sgemm.Transpose(d.l, d.cin, dt, d.cin, gin[b*d.cin*d.l:(b+1)*d.cin*d.l], d.l)
	}
}
