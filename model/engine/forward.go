package engine

import (
	"math"

	"rgcpred/internal/sgemm"
)

// forward computes the head outputs of one window (rgc.WindowLen floats,
// [InRows, bins] row-major) for the cell on embedding row cell, into logits
// (Config.HeadOut floats): head(gpt(cnn(input) + embed(cell))). Shapes in
// comments are [positions, channels] (channels-last) for the CNN and
// [tokens, features] for the transformer; paper sizes for gpt-a.
func (n *network) forward(wk *worker, window []float32, cell int, logits []float32) {
	x := n.stem(wk, window) // [512, 16]
	x = n.cnnBlocks(wk, x)  // [64, 64]
	n.gpt(wk, x, cell)      // residual stream wk.x [64, 64]
	n.headLast(wk, logits)  // [81]
}

// stem runs conv1 and conv2 of the CNN encoder (docs/spike-prediction.md
// section 2) and returns their output [512, 16].
func (n *network) stem(wk *worker, window []float32) []float32 {
	c := n.cfg
	// Input [5, 1024] -> channels-last [1024, 5], zero-padded by conv1.pad
	// (10) positions on each side (the padding rows are never written).
	p := n.conv1.pad
	for r := 0; r < c.InRows; r++ {
		row := window[r*n.bins : (r+1)*n.bins]
		dst := wk.in[p*c.InRows+r:]
		for j, v := range row {
			dst[j*c.InRows] = v
		}
	}

	// conv1 (k21, stride 2) + bn1 + ReLU: [1024, 5] -> [512, 16], written
	// inside conv2's zero padding.
	c1 := wk.c1[n.conv2.pad*c.StemCh:]
	n.conv1.apply(wk.in, n.stemLen, c1, true, wk.work)

	// conv2 (k21, stride 1) + bn2 + ReLU: [512, 16] -> [512, 16].
	n.conv2.apply(wk.c1, n.stemLen, wk.c2, true, wk.work)
	return wk.c2
}

// cnnBlocks runs the 4 bottleneck blocks: [512, 16] -> [256, 64] ->
// [128, 64] -> [64, 64] -> [64, 64].
func (n *network) cnnBlocks(wk *worker, x []float32) []float32 {
	for i := range n.blocks {
		x = n.blocks[i].forward(wk, &wk.blocks[i], x)
	}
	return x
}

// gpt runs the transformer stem (GPT-2, pre-layer-norm) on the CNN output x
// and leaves the residual stream in wk.x [T, d].
func (n *network) gpt(wk *worker, x []float32, cell int) {
	// The CNN output [64 positions, 64 channels] is read as 64 tokens of 64
	// features. gpt-b projects them to the model width.
	T, d := n.tokens, n.width
	h := wk.x // residual stream [T, d]
	if n.proj != nil {
		n.proj.apply(T, x, n.cfg.BlockOut, h, d, wk.work)
	} else {
		copy(h, x[:T*d])
	}

	// x += pos_emb[j] + cell_emb[cell]
	ce := n.cellEmb[cell*d : (cell+1)*d]
	for j := 0; j < T; j++ {
		row := h[j*d : (j+1)*d]
		pe := n.posEmb[j*d : (j+1)*d]
		for f := range row {
			row[f] += pe[f] + ce[f]
		}
	}

	for l := range n.layers {
		n.layers[l].forward(n, wk, l == len(n.layers)-1)
	}
}

// headLast applies the final layer norm ln_f and the head to the last token
// of the residual stream.
func (n *network) headLast(wk *worker, logits []float32) {
	T, d := n.tokens, n.width
	last := wk.x[(T-1)*d : T*d]
	layerNorm(last, wk.last, n.lnfw, n.lnfb)
	n.head.apply(1, wk.last, d, logits, len(logits), wk.work)
}

// forward runs one bottleneck block on x [lIn, in] and returns its output
// [lOut, out] (a slice of buf).
func (b *block) forward(wk *worker, buf *blockBuf, x []float32) []float32 {
	// conv1 (1x1) + bn1 + ReLU: [lIn, in] -> [lIn, mid], inside conv2's
	// zero padding.
	h1 := buf.h1[b.conv2.pad*b.mid:]
	b.conv1.apply(x, b.lIn, h1, true, wk.work)

	// conv2 (k7, stride s) + bn2 + ReLU: [lIn, mid] -> [lOut, mid].
	b.conv2.apply(buf.h1, b.lOut, buf.h2, true, wk.work)

	// conv3 (1x1) + bn3: [lOut, mid] -> [lOut, out].
	b.conv3.apply(buf.h2, b.lOut, buf.h3, false, wk.work)

	// Squeeze-excite (Hu et al., 2018): gate each channel by
	// sigmoid(fc2(relu(fc1(mean over positions)))).
	pool := wk.pool[:b.out]
	clear(pool)
	for l := 0; l < b.lOut; l++ {
		row := buf.h3[l*b.out : (l+1)*b.out]
		row = row[:len(pool)]
		for ch, v := range row {
			pool[ch] += v
		}
	}
	inv := 1 / float32(b.lOut)
	for ch := range pool {
		pool[ch] *= inv
	}
	b.se1.matvec(pool, wk.seHid, b.se1w)
	relu(wk.seHid)
	b.se2.matvec(wk.seHid, wk.seGate, b.se2w)
	for ch, v := range wk.seGate {
		wk.seGate[ch] = sigmoid(v)
	}

	// Shortcut: 1x1 conv (stride s) + bn when the shape changes, else x.
	sc := x
	if b.shortcut != nil {
		b.shortcut.apply(x, b.lOut, buf.sc, false, wk.work)
		sc = buf.sc
	}

	// out = ReLU(h3 * gate + shortcut)
	out := buf.out
	gate := wk.seGate[:b.out]
	for l := 0; l < b.lOut; l++ {
		o := out[l*b.out : (l+1)*b.out]
		h3 := buf.h3[l*b.out : (l+1)*b.out]
		s := sc[l*b.out : (l+1)*b.out]
		h3, s, g := h3[:len(o)], s[:len(o)], gate[:len(o)]
		for ch := range o {
			v := h3[ch]*g[ch] + s[ch]
			if v < 0 {
				v = 0
			}
			o[ch] = v
		}
	}
	return out
}

// forward runs one transformer block on the residual stream wk.x [T, d].
// In the last block only the last token's output is needed (the head reads
// nothing else), so attention and the MLP run for that token alone.
func (ly *layer) forward(n *network, wk *worker, lastOnly bool) {
	T, d, hd := n.tokens, n.width, n.headDim
	x := wk.x

	// ln1, then q, k, v for every token: [T, d] -> [T, 3d], columns
	// [q | k | v], head h in columns h*hd..(h+1)*hd of each.
	for j := 0; j < T; j++ {
		layerNorm(x[j*d:(j+1)*d], wk.h[j*d:(j+1)*d], ly.ln1w, ly.ln1b)
	}
	ly.qkv.apply(T, wk.h, d, wk.qkv, 3*d, wk.work)

	// Causal multi-head self-attention, scale 1/sqrt(hd) (folded into the
	// q columns of qkv at load).
	q0 := 0 // first query token
	if lastOnly {
		q0 = T - 1
	}
	nq := T - q0
	for head := 0; head < n.cfg.Heads; head++ {
		q := wk.qkv[q0*3*d+head*hd:]
		k := wk.qkv[d+head*hd:]
		v := wk.qkv[2*d+head*hd:]
		// att = q k^T / sqrt(hd): [nq, T]
		att := wk.att[:nq*T]
		sgemm.GemmWork(wk.gemmWork, false, true, nq, T, hd, 1, q, 3*d, k, 3*d, 0, att, T)
		// Causal softmax: query q0+i sees keys 0..q0+i.
		softmaxCausal(att, nq, T, q0)
		// y[:, head] = att v: [nq, T] x [T, hd] -> [nq, hd]
		sgemm.GemmWork(wk.gemmWork, false, false, nq, hd, T, 1, att, T, v, 3*d, 0, wk.y[head*hd:], d)
	}

	// x += y W_proj + b (rows q0..T-1 only)
	ly.proj.apply(nq, wk.y, d, wk.tmp, d, wk.work)
	xs := x[q0*d : T*d]
	for i, v := range wk.tmp[:nq*d] {
		xs[i] += v
	}

	// ln2, MLP: x += gelu(h W_fc + b) W_proj + b
	for j := 0; j < nq; j++ {
		layerNorm(xs[j*d:(j+1)*d], wk.h[j*d:(j+1)*d], ly.ln2w, ly.ln2b)
	}
	ly.fc.apply(nq, wk.h, d, wk.mlp, 4*d, wk.work)
	geluTanh(wk.mlp[:nq*4*d])
	ly.mproj.apply(nq, wk.mlp, 4*d, wk.tmp, d, wk.work)
	for i, v := range wk.tmp[:nq*d] {
		xs[i] += v
	}
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
		mx := row[0]
		for _, v := range row[1:n] {
			mx = max(mx, v)
		}
		for j := range row[:n] {
			row[j] -= mx
		}
		for j := range row[n:] {
			row[n+j] = -100
		}
	}
	expInPlace(att)
	for i := 0; i < nq; i++ {
		row := att[i*T : (i+1)*T]
		n := q0 + i + 1
		var s float32
		for _, e := range row[:n] {
			s += e
		}
		inv := 1 / s
		for j := range row[:n] {
			row[j] *= inv
		}
		clear(row[n:])
	}
}

// layerNorm writes (x - mean) / sqrt(var + eps) * w + b to y.
func layerNorm(x, y, w, b []float32) {
	var s, ss float32
	for _, v := range x {
		s += v
	}
	mean := s / float32(len(x))
	for _, v := range x {
		dv := v - mean
		ss += dv * dv
	}
	inv := float32(1 / math.Sqrt(float64(ss/float32(len(x)))+lnEps))
	y = y[:len(x)]
	w = w[:len(x)]
	b = b[:len(x)]
	for i, v := range x {
		y[i] = (v-mean)*inv*w[i] + b[i]
	}
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
