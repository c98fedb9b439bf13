package engine

import (
	"math"

	"rgcpred/internal/sgemm"
	"rgcpred/model"
)

// pass is one thread's share of the forward pass of one window: part part
// of parts (0 of 1 for a window run whole), over the window's activations a
// with the thread's own workspaces wk.
type pass struct {
	wk          *worker
	a           *acts
	part, parts int
	bar         *barrier // nil when parts == 1
}

// rows returns this part's share lo..hi of n rows (positions or tokens).
// The boundaries are multiples of 4 (a whole number of the SGEMM kernels'
// smallest row tiles) near the even split. Each output row of a GEMM is the
// same sum in the same order whichever tile computes it, so the split
// changes no bit of the result.
func (p *pass) rows(n int) (lo, hi int) {
	at := func(part int) int {
		if part == p.parts {
			return n
		}
		return min(n, (n*part/p.parts+2)/4*4)
	}
	return at(p.part), at(p.part + 1)
}

// cols returns this part's share lo..hi of n channels.
func (p *pass) cols(n int) (lo, hi int) {
	return n * p.part / p.parts, n * (p.part + 1) / p.parts
}

// sync waits until every part of the window has reached the same point,
// before reading rows that other parts wrote.
func (p *pass) sync() {
	if p.parts > 1 {
		p.bar.wait(p.part)
	}
}

// forward computes this part's share of the head outputs of one window
// (rgc.WindowLen floats, [InRows, bins] row-major) for the cell on
// embedding row cell, head(gpt(cnn(input) + embed(cell))); part 0 writes
// logits (Config.HeadOut floats). Shapes in comments are [positions,
// channels] (channels-last) for the CNN and [tokens, features] for the
// transformer; paper sizes for gpt-a.
func (n *network) forward(p *pass, window []float32, cell int, logits []float32) {
	x := n.stem(p, window) // [512, 16]
	x = n.cnnBlocks(p, x)  // [64, 64]
	n.gpt(p, x, cell)      // residual stream a.x [64, 64]
	if p.part == 0 {
		n.headLast(p, logits) // [81]
	}
}

// stem runs conv1 and conv2 of the CNN encoder (docs/model.md
// section 2.1) and returns their output [512, 16] (this part's rows written).
func (n *network) stem(p *pass, window []float32) []float32 {
	c, a, work := n.cfg, p.a, p.wk.work
	// Input [5, 1024] -> channels-last [1024, 5], zero-padded by conv1.pad
	// (10) positions on each side (the padding rows are never written).
	pad := n.conv1.pad
	lo, hi := p.rows(n.bins)
	for r := 0; r < c.InRows; r++ {
		row := window[r*n.bins : (r+1)*n.bins]
		dst := a.in[pad*c.InRows+r:]
		for j := lo; j < hi; j++ {
			dst[j*c.InRows] = row[j]
		}
	}
	p.sync() // conv1 reads its neighbours' input positions

	// conv1 (k21, stride 2) + bn1 + ReLU: [1024, 5] -> [512, 16], written
	// inside conv2's zero padding.
	lo, hi = p.rows(n.stemLen)
	c1 := a.c1[n.conv2.pad*c.StemCh:]
	n.conv1.apply(a.in, lo, hi, c1, true, work)
	p.sync()

	// conv2 (k21, stride 1) + bn2 + ReLU: [512, 16] -> [512, 16].
	n.conv2.apply(a.c1, lo, hi, a.c2, true, work)
	return a.c2
}

// cnnBlocks runs the 4 bottleneck blocks: [512, 16] -> [256, 64] ->
// [128, 64] -> [64, 64] -> [64, 64].
func (n *network) cnnBlocks(p *pass, x []float32) []float32 {
	for i := range n.blocks {
		x = n.blocks[i].forward(p, &p.a.blocks[i], x)
	}
	return x
}

// gpt runs the transformer stem (GPT-2, pre-layer-norm) on the CNN output x
// and leaves the residual stream in a.x [T, d].
func (n *network) gpt(p *pass, x []float32, cell int) {
	// The CNN output [64 positions, 64 channels] is read as 64 tokens of 64
	// features (this part's tokens are the rows it wrote). gpt-b projects
	// them to the model width.
	T, d := n.tokens, n.width
	lo, hi := p.rows(T)
	h := p.a.x // residual stream [T, d]
	if n.proj != nil {
		n.proj.apply(hi-lo, x[lo*n.cfg.BlockOut:], n.cfg.BlockOut, h[lo*d:], d, p.wk.work)
	} else {
		copy(h[lo*d:hi*d], x[lo*d:hi*d])
	}

	// x += pos_emb[j] + cell_emb[cell]
	ce := n.cellEmb[cell*d : (cell+1)*d]
	for j := lo; j < hi; j++ {
		row := h[j*d : (j+1)*d]
		pe := n.posEmb[j*d : (j+1)*d]
		for f := range row {
			row[f] += pe[f] + ce[f]
		}
	}

	for l := range n.layers {
		n.layers[l].forward(n, p, p.a.qkv[l%2], l == len(n.layers)-1)
	}
}

// headLast applies the final layer norm ln_f and the head to the last token
// of the residual stream.
func (n *network) headLast(p *pass, logits []float32) {
	T, d := n.tokens, n.width
	last := p.a.x[(T-1)*d : T*d]
	layerNorm(last, p.a.last, n.lnfw, n.lnfb)
	n.head.apply(1, p.a.last, d, logits, len(logits), p.wk.work)
}

// forward runs this part's share of one bottleneck block on x [lIn, in]
// and returns its output [lOut, out] (a slice of buf).
func (b *block) forward(p *pass, buf *blockBuf, x []float32) []float32 {
	wk := p.wk
	// conv1 (1x1) + bn1 + ReLU: [lIn, in] -> [lIn, mid], inside conv2's
	// zero padding. It reads only this part's rows of x.
	lo, hi := p.rows(b.lIn)
	h1 := buf.h1[b.conv2.pad*b.mid:]
	b.conv1.apply(x, lo, hi, h1, true, wk.work)
	p.sync() // conv2 reads its neighbours' rows of h1

	// conv2 (k7, stride s) + bn2 + ReLU: [lIn, mid] -> [lOut, mid].
	lo, hi = p.rows(b.lOut)
	b.conv2.apply(buf.h1, lo, hi, buf.h2, true, wk.work)

	// conv3 (1x1) + bn3: [lOut, mid] -> [lOut, out].
	b.conv3.apply(buf.h2, lo, hi, buf.h3, false, wk.work)

	// Shortcut: 1x1 conv (stride s) + bn when the shape changes, else x.
	sc := x
	if b.shortcut != nil {
		b.shortcut.apply(x, lo, hi, buf.sc, false, wk.work)
		sc = buf.sc
	}
	p.sync() // the pooling reads every row of h3

	// Squeeze-excite (Hu et al., 2018): gate each channel by
	// sigmoid(fc2(relu(fc1(mean over positions)))). Each part sums its
	// channels over all positions; every part then computes the (tiny)
	// gates itself.
	c0, c1 := p.cols(b.out)
	pool := p.a.pool[c0:c1]
	clear(pool)
	for l := 0; l < b.lOut; l++ {
		addTo(pool, buf.h3[l*b.out+c0:])
	}
	scaleAdd(pool, 1/float32(b.lOut), 0)
	p.sync() // the gates read every channel's mean
	b.se1.matvec(p.a.pool, wk.seHid, b.se1w)
	relu(wk.seHid)
	b.se2.matvec(wk.seHid, wk.seGate, b.se2w)
	for ch, v := range wk.seGate {
		wk.seGate[ch] = sigmoid(v)
	}

	// out = ReLU(h3 * gate + shortcut)
	out := buf.out
	gate := wk.seGate[:b.out]
	for l := lo; l < hi; l++ {
		r := l * b.out
		gateRelu(out[r:r+b.out], buf.h3[r:], gate, sc[r:])
	}
	return out
}

// forward runs this part's share of one transformer block on the residual
// stream a.x [T, d], with qkv as the block's [T, 3d] buffer (consecutive
// blocks alternate between two, so that one part's next q, k, v never
// overwrite keys another part is still reading). Each part owns the tokens
// p.rows(T) and computes everything for them; only attention reads other
// tokens' keys and values. In the last block only the last token's output
// is needed (the head reads nothing else): part 0 alone runs attention and
// the MLP for that token.
func (ly *layer) forward(n *network, p *pass, qkv []float32, lastOnly bool) {
	T, d, hd := n.tokens, n.width, n.headDim
	a, wk := p.a, p.wk
	x := a.x

	// ln1, then q, k, v for this part's tokens: [T, d] -> [T, 3d], columns
	// [q | k | v], head h in columns h*hd..(h+1)*hd of each.
	lo, hi := p.rows(T)
	for j := lo; j < hi; j++ {
		layerNorm(x[j*d:(j+1)*d], a.h[j*d:(j+1)*d], ly.ln1w, ly.ln1b)
	}
	ly.qkv.apply(hi-lo, a.h[lo*d:], d, qkv[lo*3*d:], 3*d, wk.work)
	p.sync() // attention reads every token's k and v

	// Queries q0..q1 of this part.
	q0, q1 := lo, hi
	if lastOnly {
		if p.part != 0 {
			return
		}
		q0, q1 = T-1, T
	}
	nq := q1 - q0
	if nq == 0 {
		return
	}

	// Causal multi-head self-attention, scale 1/sqrt(hd) (folded into the
	// q columns of qkv at load). Query q0+i sees keys 0..q0+i, so keys
	// q1.. are never needed.
	y := a.y[q0*d:]
	for head := 0; head < n.cfg.Heads; head++ {
		q := qkv[q0*3*d+head*hd:]
		k := qkv[d+head*hd:]
		v := qkv[2*d+head*hd:]
		// att = q k^T / sqrt(hd): [nq, q1]
		att := wk.att[:nq*q1]
		sgemm.GemmWork(wk.gemmWork, false, true, nq, q1, hd, 1, q, 3*d, k, 3*d, 0, att, q1)
		softmaxCausal(att, nq, q1, q0)
		// y[:, head] = att v: [nq, q1] x [q1, hd] -> [nq, hd]
		sgemm.GemmWork(wk.gemmWork, false, false, nq, hd, q1, 1, att, q1, v, 3*d, 0, y[head*hd:], d)
	}

	// x += y W_proj + b
	tmp := a.tmp[q0*d : q1*d]
	ly.proj.apply(nq, y, d, tmp, d, wk.work)
	xs := x[q0*d : q1*d]
	addTo(xs, tmp)

	// ln2, MLP: x += gelu(h W_fc + b) W_proj + b
	h := a.h[q0*d : q1*d]
	for j := 0; j < nq; j++ {
		layerNorm(xs[j*d:(j+1)*d], h[j*d:(j+1)*d], ly.ln2w, ly.ln2b)
	}
	mlp := a.mlp[q0*4*d : q1*4*d]
	ly.fc.apply(nq, h, d, mlp, 4*d, wk.work)
	geluTanh(mlp)
	ly.mproj.apply(nq, mlp, 4*d, tmp, d, wk.work)
	addTo(xs, tmp)
}

// softmaxCausal replaces each row i of att [nq, T] by the softmax of its
// first q0+i+1 entries (the keys query q0+i may see) and zeroes the rest.
// The exponentials run over the whole matrix at once (vectorised); masked
// entries are set to a large negative number first and zeroed after.
func softmaxCausal(att []float32, nq, T, q0 int) {
	att = att[:nq*T]
	for i := 0; i < nq; i++ {
		row := att[i*T : (i+1)*T]
		n := q0 + i + 1
		scaleAdd(row[:n], 1, -maxOf(row[:n]))
		for j := range row[n:] {
			row[n+j] = -100
		}
	}
	expInPlace(att)
	for i := 0; i < nq; i++ {
		row := att[i*T : (i+1)*T]
		n := q0 + i + 1
		scaleAdd(row[:n], 1/sum(row[:n]), 0)
		clear(row[n:])
	}
}

// layerNorm writes (x - mean) / sqrt(var + eps) * w + b to y.
func layerNorm(x, y, w, b []float32) {
	mean := sum(x) / float32(len(x))
	vr := sumSqDev(x, mean) / float32(len(x))
	inv := float32(1 / math.Sqrt(float64(vr)+model.LNEps))
	norm(y, x, w, b, mean, inv)
}

func relu(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// geluTanhGo is the portable geluTanh, using tanh(u) = 1 - 2 / (exp(2u) + 1).
func geluTanhGo(x []float32) {
	const c = 0.7978845608028654 // sqrt(2/pi)
	for i, v := range x {
		u := c * (v + 0.044715*v*v*v)
		t := 1 - 2/(expf(2*u)+1)
		x[i] = 0.5 * v * (1 + t)
	}
}

// expf is exp for float32 arguments, accurate to about 1 ulp: x = n ln2 + r
// with |r| <= ln2/2 (Cody-Waite split of ln2), e^r from its degree-7 Taylor
// polynomial (truncation error below 1e-8 relative), 2^n put into the
// exponent bits. Arguments outside [-87, 88] (overflow, subnormal results,
// NaN) take math.Exp.
func expf(x float32) float32 {
	if !(x >= -87 && x <= 88) {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	y := x * log2e
	var n int32
	if y >= 0 {
		n = int32(y + 0.5)
	} else {
		n = int32(y - 0.5)
	}
	fn := float32(n)
	r := x - fn*ln2hi - fn*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(n+127)<<23)
}
