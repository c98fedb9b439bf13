package engine

import (
	"math"

	"rgcpred/base/sgemm"
	"rgcpred/base/vec"
	"rgcpred/model"
)

// pass is one thread's walk through the forward pass of one window, over
// the window's activations a with the thread's own workspaces wk. A window
// run whole (tk nil) is one thread's alone; a window split across threads
// is walked by every thread of the call, each doing the chunks of each
// phase it claims from tk (see tickets).
type pass struct {
	wk      *worker
	a       *acts
	tk      *tickets // nil: the whole window on this thread
	threads int      // threads of the call: sets how finely phases are cut
	lead    bool     // the caller's thread (its waits measure contention)
	// The current phase's tickets base..end; synced is set once the
	// phase is complete (sync), and a new phase may only open then.
	base, end uint64
	synced    bool
	// between, if not nil, runs between the stages of a window (the
	// caller's whole windows: hands over the helpers' finished windows).
	between func()
}

// Chunking: a phase of n rows is cut into up to chunksPerThread chunks per
// thread of at least minChunkRows rows each (squeeze-excite channels: at
// least minChunkCols), so that a thread which stalls holds little work
// and the rows fall evenly between threads whatever their speed.
const (
	chunksPerThread = 2
	minChunkRows    = 16
	minChunkCols    = 16
)

// chunks is one thread's share of a phase, claimed chunk by chunk:
//
//	for c := p.rows(n); c.next(); {
//		... rows c.lo..c.hi ...
//	}
//	p.sync()
type chunks struct {
	p      *pass
	n, cut int  // rows, chunks
	align  int  // chunk boundaries are multiples of align
	held   bool // a chunk is claimed and not finished
	lo, hi int  // the rows of the chunk claimed
}

// rows opens a phase over n rows (positions or tokens). The chunk
// boundaries are multiples of 4 (a whole number of the SGEMM kernels'
// smallest row tiles) near an even cut. Each output row of a GEMM is the
// same sum in the same order whichever tile computes it, so the cut
// changes no bit of the result.
func (p *pass) rows(n int) chunks {
	return p.open(n, p.cut(n/minChunkRows), 4)
}

// cols opens a phase over n channels.
func (p *pass) cols(n int) chunks {
	return p.open(n, p.cut(n/minChunkCols), 1)
}

// windows opens a phase of n windows, one per chunk.
func (p *pass) windows(n int) chunks {
	return p.open(n, max(1, n), 1)
}

// one opens a phase of a single chunk (rows 0..1), done by whichever
// thread claims it.
func (p *pass) one() chunks {
	return p.open(1, 1, 1)
}

// cut is the number of chunks of a phase that has room for at most most.
func (p *pass) cut(most int) int {
	return max(1, min(chunksPerThread*p.threads, most))
}

// open opens a phase of n rows in cut chunks whose boundaries are
// multiples of align (a window run whole: one chunk).
func (p *pass) open(n, cut, align int) chunks {
	if p.tk == nil {
		return chunks{p: p, n: n, cut: 1, align: align}
	}
	if !p.synced {
		panic("engine: phase opened before the previous phase completed")
	}
	p.base, p.synced = p.end, false
	p.end += uint64(cut)
	return chunks{p: p, n: n, cut: cut, align: align}
}

// next finishes the chunk held (if any) and claims the next one, setting
// lo and hi; false when the phase has no chunk left to claim.
func (c *chunks) next() bool {
	p := c.p
	if p.tk == nil {
		if c.held {
			return false
		}
		c.held, c.lo, c.hi = true, 0, c.n
		return true
	}
	if c.held {
		p.tk.finish(p.end)
		c.held = false
	}
	t, ok := p.tk.claim(p.end)
	if !ok {
		return false
	}
	j := int(t - p.base)
	c.held = true
	c.lo, c.hi = c.at(j), c.at(j+1)
	return true
}

// at is the first row of chunk j.
func (c *chunks) at(j int) int {
	if j == c.cut {
		return c.n
	}
	return min(c.n, (c.n*j/c.cut+c.align/2)/c.align*c.align)
}

// sync waits until every chunk of the phase is done, before reading rows
// that other threads wrote.
func (p *pass) sync() {
	if p.tk == nil {
		return
	}
	if p.tk.wait(p.end) && p.lead {
		p.tk.parks.Add(1)
	}
	p.synced = true
}

// forward computes p's share of the outputs of one window (rgc.WindowLen
// floats, [InRows, bins] row-major) for the cell on embedding row cell,
// head(gpt(cnn(input) + embed(cell))): the Config.Classes class
// probabilities into out when probs is set, else the Config.HeadOut raw
// head outputs. Shapes in comments are [positions, channels]
// (channels-last) for the CNN and [tokens, features] for the transformer;
// paper sizes for gpt-a. pl says which rows of the stem and block 0 the
// window computes and where block 0 keeps its rows (reuse.go).
func (n *network) forward(p *pass, window []float32, cell int, pl *plan, out []float32, probs bool) {
	x := n.stem(p, window, pl.rows) // [512, 16]
	x = n.cnnBlocks(p, x, pl)       // [64, 64]
	n.gpt(p, x, cell)               // residual stream a.x [64, 64]
	for c := p.one(); c.next(); {
		n.output(p, out, probs) // [81]
	}
	p.sync()
}

// stem runs conv1 and conv2 of the CNN encoder (docs/model.md
// section 2.1) on the rows rp.c1 and rp.c2 and returns their output
// [512, 16].
func (n *network) stem(p *pass, window []float32, rp *rowPlan) []float32 {
	c, a, work := n.cfg, p.a, p.wk.work
	// Input [5, 1024] -> channels-last [1024, 5], zero-padded by conv1.pad
	// (10) positions on each side (the padding rows are never written).
	pad := n.conv1.pad
	for ch := p.rows(n.bins); ch.next(); {
		for r := 0; r < c.InRows; r++ {
			row := window[r*n.bins : (r+1)*n.bins]
			dst := a.in[pad*c.InRows+r:]
			for j := ch.lo; j < ch.hi; j++ {
				dst[j*c.InRows] = row[j]
			}
		}
	}
	p.sync() // conv1 reads its neighbours' input positions

	// conv1 (k21, stride 2) + bn1 + ReLU: [1024, 5] -> [512, 16], written
	// inside conv2's zero padding.
	c1 := a.c1[n.conv2.pad*c.StemCh:]
	for ch := p.rows(rp.c1.total()); ch.next(); {
		for k := range rp.c1.n {
			lo, hi := rp.c1.part(k, ch.lo, ch.hi)
			n.conv1.apply(a.in, lo, hi, c1, true, work)
		}
	}
	p.sync()

	// conv2 (k21, stride 1) + bn2 + ReLU: [512, 16] -> [512, 16].
	for ch := p.rows(rp.c2.total()); ch.next(); {
		for k := range rp.c2.n {
			lo, hi := rp.c2.part(k, ch.lo, ch.hi)
			n.conv2.apply(a.c1, lo, hi, a.c2, true, work)
		}
	}
	p.sync()
	return a.c2
}

// cnnBlocks runs the 4 bottleneck blocks: [512, 16] -> [256, 64] ->
// [128, 64] -> [64, 64] -> [64, 64]; block 0 on the rows and into the
// buffers pl says.
func (n *network) cnnBlocks(p *pass, x []float32, pl *plan) []float32 {
	for i := range n.blocks {
		b, buf := &n.blocks[i], &p.a.blocks[i]
		br := blockRows{h1: all(b.lIn), out: all(b.lOut), h3: buf.h3, sc: buf.sc}
		if i == 0 {
			br.h1, br.out = pl.rows.h1, pl.rows.out
			if pl.h3 != nil {
				br.h3, br.sc, br.base = pl.h3, pl.sc, pl.base
			}
		}
		x = b.forward(p, buf, x, &br)
		if p.between != nil {
			p.between()
		}
	}
	return x
}

// blockRows says which rows a block computes (of h1, and of its output
// positions) and where it keeps its h3 and shortcut rows: a ring of lOut
// rows whose row base holds position 0 (a window's own buffers, base 0,
// or the rows kept for its cell).
type blockRows struct {
	h1, out spans
	h3, sc  []float32
	base    int
}

// ring is the row of output position l.
func (br *blockRows) ring(l, n int) int {
	if r := br.base + l; r < n {
		return r
	}
	return br.base + l - n
}

// gpt runs the transformer stem (GPT-2, pre-layer-norm) on the CNN output x
// and leaves the residual stream in a.x [T, d].
func (n *network) gpt(p *pass, x []float32, cell int) {
	// The CNN output [64 positions, 64 channels] is read as 64 tokens of 64
	// features. gpt-b projects them to the model width.
	T, d := n.tokens, n.width
	h := p.a.x // residual stream [T, d]
	ce := n.cellEmb[cell*d : (cell+1)*d]
	for ch := p.rows(T); ch.next(); {
		lo, hi := ch.lo, ch.hi
		if n.proj != nil {
			n.proj.apply(hi-lo, x[lo*n.cfg.BlockOut:], n.cfg.BlockOut, h[lo*d:], d, p.wk.work)
		} else {
			copy(h[lo*d:hi*d], x[lo*d:hi*d])
		}
		// x += pos_emb[j] + cell_emb[cell]
		for j := lo; j < hi; j++ {
			row := h[j*d : (j+1)*d]
			pe := n.posEmb[j*d : (j+1)*d]
			for f := range row {
				row[f] += pe[f] + ce[f]
			}
		}
	}
	p.sync()

	for l := range n.layers {
		n.layers[l].forward(n, p, l == len(n.layers)-1)
		if p.between != nil {
			p.between()
		}
	}
}

// output applies the final layer norm ln_f and the head to the last token
// of the residual stream, and writes the class probabilities (probs) or
// the raw head outputs to out.
func (n *network) output(p *pass, out []float32, probs bool) {
	logits := p.a.logits
	if !probs {
		logits = out
	}
	n.headLast(p, logits)
	if probs {
		n.cfg.Probs(logits, out)
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

// forward runs p's share of one bottleneck block on x [lIn, in] and
// returns its output [lOut, out] (a slice of buf), computing the rows br
// says (the others of br.h3 and br.sc hold the window's values already).
func (b *block) forward(p *pass, buf *blockBuf, x []float32, br *blockRows) []float32 {
	if b.conv1.w8 != nil {
		b.convsI8(p, buf, x)
	} else {
		b.convs(p, buf, x, br)
	}
	sc := x
	if b.shortcut != nil {
		sc = br.sc
	}
	return b.excite(p, buf, br.h3, sc, br)
}

// convs runs the block's convolutions and shortcut on the rows br says,
// into br.h3 and br.sc. Where conv2 runs int8 tap by tap (block 0 under
// INT8), its input h1 and conv3's h2 are quantized a row at a time, so
// that a row computed in one window equals the row another computes.
func (b *block) convs(p *pass, buf *blockBuf, x []float32, br *blockRows) {
	wk := p.wk
	taps := b.conv2.taps != nil
	// conv1 (1x1) + bn1 + ReLU: [lIn, in] -> [lIn, mid], inside conv2's
	// zero padding.
	pad := b.conv2.pad
	h1 := buf.h1[pad*b.mid:]
	for ch := p.rows(br.h1.total()); ch.next(); {
		for k := range br.h1.n {
			lo, hi := br.h1.part(k, ch.lo, ch.hi)
			b.conv1.apply(x, lo, hi, h1, true, wk.work)
			if taps && hi > lo {
				buf.qh1.set(h1, pad+lo, pad+hi, b.mid, pad)
			}
		}
	}
	p.sync() // conv2 reads its neighbours' rows of h1

	// conv2 (k7, stride s) + bn2 + ReLU: [lIn, mid] -> [lOut, mid], then
	// conv3 (1x1) + bn3: [lOut, mid] -> [lOut, out] on the same rows.
	// Shortcut: 1x1 conv (stride s) + bn when the shape changes (else
	// excite adds x itself).
	for ch := p.rows(br.out.total()); ch.next(); {
		for k := range br.out.n {
			lo, hi := br.out.part(k, ch.lo, ch.hi)
			if hi <= lo {
				continue
			}
			if taps {
				b.conv2.applyTaps(&buf.qh1, lo, hi, buf.h2, true, wk.work)
				buf.qh2.set(buf.h2, lo, hi, b.mid, 0)
				b.conv3.applyRingI8(&buf.qh2, lo, hi, br.h3, br.base, b.lOut, false, wk.work)
			} else {
				b.conv2.apply(buf.h1, lo, hi, buf.h2, true, wk.work)
				b.conv3.applyRing(buf.h2, lo, hi, br.h3, br.base, b.lOut, false, wk.work)
			}
			if b.shortcut != nil {
				b.shortcut.applyRing(x, lo, hi, br.sc, br.base, b.lOut, false, wk.work)
			}
		}
	}
	p.sync() // the pooling reads every row of h3
}

// convsI8 is convs on the int8 path, for every row, into buf.h3 and
// buf.sc. Each convolution's input is quantized to uint8 first: x and h2
// a row at a time (their convolutions are 1x1, so each output row reads one
// input row), h1 with one scale for the window (conv2's rows overlap), from
// its largest value, which each chunk of conv1 leaves at its first row of
// buf.h1top. Every scale is a function of the window's values alone, so
// the outputs do not depend on how the rows are cut among threads; h1top
// is read only inside claimed chunks, as a thread late to a phase runs no
// chunk of it and so never reads another window's values.
func (b *block) convsI8(p *pass, buf *blockBuf, x []float32) {
	wk := p.wk
	// conv1 (1x1) + bn1 + ReLU: [lIn, in] -> [lIn, mid], inside conv2's
	// zero padding.
	pad := b.conv2.pad
	h1 := buf.h1[pad*b.mid:]
	for ch := p.rows(b.lIn); ch.next(); {
		buf.qx.set(x, ch.lo, ch.hi, b.in, 0)
		b.conv1.applyI8(&buf.qx, ch.lo, ch.hi, h1, true, wk.work)
		buf.h1top[ch.lo] = vec.Max(h1[ch.lo*b.mid : ch.hi*b.mid])
		clear(buf.h1top[ch.lo+1 : ch.hi])
	}
	p.sync() // h1's scale needs every row's largest value

	for ch := p.rows(b.lIn); ch.next(); {
		_, inv := sgemm.U8Scale(vec.Max(buf.h1top))
		sgemm.QuantizeU8(buf.qh1.q[(pad+ch.lo)*b.mid:], h1[ch.lo*b.mid:ch.hi*b.mid], inv)
	}
	p.sync() // conv2 reads its neighbours' rows of h1

	// conv2 (k7, stride s) + bn2 + ReLU, then conv3 (1x1) + bn3 on the same
	// rows; the shortcut (1x1, stride s) + bn when the shape changes.
	var s1 [1]float32
	h1w := quantized{q: buf.qh1.q, scale: s1[:]} // one scale for the window
	for ch := p.rows(b.lOut); ch.next(); {
		lo, hi := ch.lo, ch.hi
		s1[0], _ = sgemm.U8Scale(vec.Max(buf.h1top))
		b.conv2.applyI8(&h1w, lo, hi, buf.h2, true, wk.work)
		buf.qh2.set(buf.h2, lo, hi, b.mid, 0)
		b.conv3.applyI8(&buf.qh2, lo, hi, buf.h3, false, wk.work)
		if b.shortcut != nil {
			b.shortcut.applyI8(&buf.qx, lo, hi, buf.sc, false, wk.work)
		}
	}
	p.sync() // the pooling reads every row of h3
}

// excite gates the block's h3 by its squeeze-excite and adds the shortcut
// sc (rows in the ring br says) into the block's output.
func (b *block) excite(p *pass, buf *blockBuf, h3, sc []float32, br *blockRows) []float32 {
	wk := p.wk
	// Squeeze-excite (Hu et al., 2018): gate each channel by
	// sigmoid(fc2(relu(fc1(mean over positions)))). The means are cut by
	// channel; every thread that then gates rows computes the (tiny)
	// gates itself.
	for ch := p.cols(b.out); ch.next(); {
		pool := p.a.pool[ch.lo:ch.hi]
		clear(pool)
		for l := 0; l < b.lOut; l++ {
			vec.Add(pool, pool, h3[br.ring(l, b.lOut)*b.out+ch.lo:])
		}
		vec.Affine(pool, pool, 1/float32(b.lOut), 0)
	}
	p.sync() // the gates read every channel's mean

	// out = ReLU(h3 * gate + shortcut)
	out := buf.out
	gate := wk.seGate[:b.out]
	gated := false
	for ch := p.rows(b.lOut); ch.next(); {
		if !gated {
			b.se1.matvec(p.a.pool, wk.seHid, b.se1w)
			relu(wk.seHid)
			b.se2.matvec(wk.seHid, wk.seGate, b.se2w)
			for i, v := range gate {
				gate[i] = sigmoid(v)
			}
			gated = true
		}
		for l := ch.lo; l < ch.hi; l++ {
			r, q := l*b.out, br.ring(l, b.lOut)*b.out
			vec.GateReLU(out[r:r+b.out], h3[q:], gate, sc[q:])
		}
	}
	p.sync()
	return out
}

// forward runs p's share of one transformer block on the residual stream
// a.x [T, d]. In the last block only the last token's output is needed
// (the head reads nothing else): attention and the MLP run for that token
// alone.
func (ly *layer) forward(n *network, p *pass, lastOnly bool) {
	T, d := n.tokens, n.width
	a, wk := p.a, p.wk
	x, qkv := a.x, a.qkv

	// ln1, then q, k, v: [T, d] -> [T, 3d], columns [q | k | v], head h
	// in columns h*hd..(h+1)*hd of each; for the fused attention kernel
	// the keys also transposed, a.kt [d, T].
	fused := n.fusedAttn()
	for ch := p.rows(T); ch.next(); {
		for j := ch.lo; j < ch.hi; j++ {
			layerNorm(x[j*d:(j+1)*d], a.h[j*d:(j+1)*d], ly.ln1w, ly.ln1b)
		}
		ly.qkv.apply(ch.hi-ch.lo, a.h[ch.lo*d:], d, qkv[ch.lo*3*d:], 3*d, wk.work)
		if fused {
			for j := ch.lo; j < ch.hi; j++ {
				k := qkv[j*3*d+d : j*3*d+2*d]
				for c, v := range k {
					a.kt[c*T+j] = v
				}
			}
		}
	}
	p.sync() // attention reads every token's k and v

	// Queries q0..q1 of each chunk: all tokens, or the last alone.
	var queries chunks
	first := 0
	if lastOnly {
		queries, first = p.one(), T-1
	} else {
		queries = p.rows(T)
	}
	for ch := queries; ch.next(); {
		ly.attendMLP(n, p, qkv, first+ch.lo, first+ch.hi)
	}
	p.sync()
}

// attendMLP runs causal self-attention, its projection and the MLP for
// queries q0..q1, adding both to the residual stream a.x.
func (ly *layer) attendMLP(n *network, p *pass, qkv []float32, q0, q1 int) {
	d := n.width
	a, wk := p.a, p.wk
	nq := q1 - q0
	if nq == 0 {
		return
	}

	// Causal multi-head self-attention, scale 1/sqrt(hd) (folded into the
	// q columns of qkv at load). Query q0+i sees keys 0..q0+i, so keys
	// q1.. are never needed.
	y := a.y[q0*d:]
	fused := n.fusedAttn()
	for head := 0; head < n.cfg.Heads; head++ {
		if fused {
			n.attendFused(p, qkv, head, q0, q1, y)
		} else {
			n.attendGEMM(p, qkv, head, q0, q1, y)
		}
	}

	// x += y W_proj + b
	tmp := a.tmp[q0*d : q1*d]
	ly.proj.apply(nq, y, d, tmp, d, wk.work)
	xs := a.x[q0*d : q1*d]
	vec.Add(xs, xs, tmp)

	// ln2, MLP: x += gelu(h W_fc + b) W_proj + b
	h := a.h[q0*d : q1*d]
	for j := 0; j < nq; j++ {
		layerNorm(xs[j*d:(j+1)*d], h[j*d:(j+1)*d], ly.ln2w, ly.ln2b)
	}
	mlp := a.mlp[q0*4*d : q1*4*d]
	ly.fc.apply(nq, h, d, mlp, 4*d, wk.work)
	vec.Gelu(mlp)
	ly.mproj.apply(nq, mlp, 4*d, tmp, d, wk.work)
	vec.Add(xs, xs, tmp)
}

// attendFused runs one head's attention for queries q0..q1 on the fused
// kernel (attn_amd64.s), into the head's columns of y (row 0: query q0),
// from the keys a.kt transposed in the q, k, v phase.
func (n *network) attendFused(p *pass, qkv []float32, head, q0, q1 int, y []float32) {
	d, hd, nq := n.width, n.headDim, q1-q0
	q := qkv[q0*3*d+head*hd : (q1-1)*3*d+(head+1)*hd]
	kt := p.a.kt[head*hd*n.tokens : (head+1)*hd*n.tokens]
	v := qkv[2*d+head*hd : (q1-1)*3*d+2*d+(head+1)*hd]
	out := y[head*hd : (nq-1)*d+(head+1)*hd]
	wide := hd / 32 // 16 columns a head, or 32
	attnAVX512(&q[0], 3*d, nq, q0+1, &kt[0], hd, &v[0], 3*d, wide, &p.wk.att[0], &out[0], d)
}

// attendGEMM is attendFused as two GEMMs and a softmax pass.
func (n *network) attendGEMM(p *pass, qkv []float32, head, q0, q1 int, y []float32) {
	d, hd, nq, wk := n.width, n.headDim, q1-q0, p.wk
	q := qkv[q0*3*d+head*hd:]
	k := qkv[d+head*hd:]
	v := qkv[2*d+head*hd:]
	// att = q k^T / sqrt(hd): [nq, q1]
	att := wk.att[:nq*q1]
	sgemm.GemmWork(wk.gemmWork, false, true, nq, q1, hd, 1, q, 3*d, k, 3*d, 0, att, q1)
	vec.SoftmaxCausal(att, nq, q1, q0)
	// y[:, head] = att v: [nq, q1] x [q1, hd] -> [nq, hd]
	sgemm.GemmWork(wk.gemmWork, false, false, nq, hd, q1, 1, att, q1, v, 3*d, 0, y[head*hd:], d)
}

// layerNorm writes (x - mean) / sqrt(var + eps) * w + b to y.
func layerNorm(x, y, w, b []float32) {
	mean := vec.Sum(x) / float32(len(x))
	vr := vec.SumSqDev(x, mean) / float32(len(x))
	inv := float32(1 / math.Sqrt(float64(vr)+model.LNEps))
	vec.Norm(y[:len(x)], x, w, b, mean, inv)
}

func relu(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

func sigmoid(x float32) float32 { return 1 / (1 + vec.Expf(-x)) }
