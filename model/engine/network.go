package engine

import (
	"fmt"
	"math"

	"rgcpred/base/sgemm"
	"rgcpred/model"
)

// block is a bottleneck block with squeeze-excite.
type block struct {
	stride, in, mid, out, lIn, lOut int
	conv1, conv2, conv3             conv
	shortcut                        *conv // nil: identity
	se1, se2                        linear
	se1w, se2w                      []float32 // raw [in, out] weights for matvec
}

// convList returns the block's convolutions in order: conv1, conv2, conv3 and
// the shortcut where it has one. For set-up walks, not the forward pass.
func (b *block) convList() []*conv {
	cs := []*conv{&b.conv1, &b.conv2, &b.conv3}
	if b.shortcut != nil {
		cs = append(cs, b.shortcut)
	}
	return cs
}

// layer is a GPT-2 transformer block.
type layer struct {
	ln1w, ln1b, ln2w, ln2b []float32
	qkv, proj, fc, mproj   linear
}

// network holds the prepared weights; read-only, shared by the workers.
type network struct {
	cfg                     model.Config
	conv1, conv2            conv
	blocks                  []block
	proj                    *linear // nil unless Config.HasProj
	cellEmb, posEmb         []float32
	layers                  []layer
	lnfw, lnfb              []float32
	head                    linear
	tokens, width, headDim  int
	conv1Out, stemLen, bins int
	arith                   Precision           // the arithmetic in effect (precision.go)
	w16                     []*sgemm.PackedBF16 // bf16 weights once prepared
	w8                      []*sgemm.PackedI8   // int8 weights once prepared
	taps                    []*sgemm.PackedI8   // block 0's conv2 taps in int8, once prepared
	tap3                    *sgemm.PackedI8     // block 0's conv3 in int8, once prepared
}

func paramSpec(c model.Config, name string) model.ParamSpec {
	for _, p := range c.Params() {
		if p.Name == name {
			return p
		}
	}
	panic("engine: no parameter " + name) // Weights.Check passed: unreachable
}

func newNetwork(w *model.Weights) *network {
	c := w.Config
	n := &network{cfg: c, tokens: c.Tokens(), width: c.Width(), headDim: c.HeadDim, bins: c.InBins, arith: FP32}
	n.conv1 = newConv(w, "cnn.conv1.weight", "cnn.bn1", 2)
	n.conv2 = newConv(w, "cnn.conv2.weight", "cnn.bn2", 1)
	n.stemLen = c.InBins / 2
	l := n.stemLen
	for i := 0; i < c.NumBlocks(); i++ {
		p := fmt.Sprintf("cnn.blocks.%d", i)
		s := c.BlockStride(i)
		b := block{stride: s, in: c.BlockIn(i), mid: c.BlockMid, out: c.BlockOut, lIn: l, lOut: l / s,
			conv1: newConv(w, p+".conv1.weight", p+".bn1", 1),
			conv2: newConv(w, p+".conv2.weight", p+".bn2", s),
			conv3: newConv(w, p+".conv3.weight", p+".bn3", 1),
			se1:   newLinear(w, p+".se.fc1"), se2: newLinear(w, p+".se.fc2"),
			se1w: w.Get(p + ".se.fc1.weight"), se2w: w.Get(p + ".se.fc2.weight"),
		}
		if c.BlockHasShortcut(i) {
			sc := newConv(w, p+".shortcut.conv.weight", p+".shortcut.bn", s)
			b.shortcut = &sc
		}
		n.blocks = append(n.blocks, b)
		l /= s
	}
	if c.HasProj() {
		pr := newLinear(w, "gpt.proj")
		n.proj = &pr
	}
	n.cellEmb = w.Get("gpt.cell_emb")
	n.posEmb = w.Get("gpt.pos_emb")
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("gpt.blocks.%d", i)
		// Fold the attention scale 1/sqrt(head_dim) into the q columns of
		// qkv (w is the engine's private copy), so the score GEMM needs none.
		d, scale := c.Width(), float32(1/math.Sqrt(float64(c.HeadDim)))
		qw, qb := w.Get(p+".attn.qkv.weight"), w.Get(p+".attn.qkv.bias")
		for r := 0; r < d; r++ {
			for col := 0; col < d; col++ {
				qw[r*3*d+col] *= scale
			}
		}
		for col := 0; col < d; col++ {
			qb[col] *= scale
		}
		n.layers = append(n.layers, layer{
			ln1w: w.Get(p + ".ln1.weight"), ln1b: w.Get(p + ".ln1.bias"),
			ln2w: w.Get(p + ".ln2.weight"), ln2b: w.Get(p + ".ln2.bias"),
			qkv: newLinear(w, p+".attn.qkv"), proj: newLinear(w, p+".attn.proj"),
			fc: newLinear(w, p+".mlp.fc"), mproj: newLinear(w, p+".mlp.proj"),
		})
	}
	n.lnfw, n.lnfb = w.Get("gpt.ln_f.weight"), w.Get("gpt.ln_f.bias")
	n.head = newLinear(w, "head")
	return n
}

type blockBuf struct {
	h1  []float32 // [pad + lIn + pad, mid], padding rows stay zero
	h2  []float32 // [lOut, mid]
	h3  []float32 // [lOut, out]
	sc  []float32 // [lOut, out] shortcut branch
	out []float32 // [lOut, out]

	// The int8 path's quantized convolution inputs, and the largest value
	// of each chunk of h1 at the chunk's first row (0 in its others).
	qx, qh1, qh2 quantized // [lIn, in], as h1, [lOut, mid]
	h1top        []float32 // [lIn]
}

// acts are the activations of one window, shared by the threads that
// compute it (each writes its own rows).
type acts struct {
	in     []float32 // [pad + bins + pad, InRows]
	c1     []float32 // [pad + stemLen + pad, stemCh]
	c2     []float32 // [stemLen, stemCh]
	blocks []blockBuf
	pool   []float32 // squeeze-excite: channel means

	x, h   []float32 // [tokens, width] residual stream and normalised copy
	qkv    []float32 // [tokens, 3 width]
	kt     []float32 // [width, tokens] keys transposed (fused attention)
	y      []float32 // [tokens, width] attention output (heads concatenated)
	mlp    []float32 // [tokens, 4 width]
	tmp    []float32 // [tokens, width]
	last   []float32 // [width] final normalised last token
	logits []float32 // head output of the window (Predict converts it)
}

// worker is one thread: its GEMM workspaces and small scratch, and the
// activations of the windows it runs whole.
type worker struct {
	work     []float32 // sgemm.GemmPacked(BiasBF16) workspace
	gemmWork []float32 // sgemm.GemmWork workspace
	att      []float32 // [tokens, tokens] attention weights of one head
	seHid    []float32 // squeeze-excite hidden layer
	seGate   []float32 // squeeze-excite channel gates
	acts     *acts
}

func newWorker(n *network) *worker {
	c := n.cfg
	d, t := n.width, n.tokens
	wk := &worker{
		work: make([]float32, max(sgemm.WorkSize(), sgemm.WorkSizeBF16())), gemmWork: make([]float32, sgemm.GemmWorkSize()),
		att: make([]float32, t*t), seHid: make([]float32, c.BlockOut/c.SEReduction),
		seGate: make([]float32, c.BlockOut),
	}
	a := &acts{
		in:   make([]float32, (n.bins+2*n.conv1.pad)*c.InRows),
		c1:   make([]float32, (n.stemLen+2*n.conv2.pad)*c.StemCh),
		c2:   make([]float32, n.stemLen*c.StemCh),
		pool: make([]float32, c.BlockOut),
		x:    make([]float32, t*d), h: make([]float32, t*d),
		qkv: make([]float32, t*3*d), kt: make([]float32, d*t),
		y: make([]float32, t*d), mlp: make([]float32, t*4*d),
		tmp: make([]float32, t*d), last: make([]float32, d),
		logits: make([]float32, c.HeadOut()),
	}
	for _, b := range n.blocks {
		a.blocks = append(a.blocks, blockBuf{
			h1: make([]float32, (b.lIn+2*b.conv2.pad)*b.mid),
			h2: make([]float32, b.lOut*b.mid), h3: make([]float32, b.lOut*b.out),
			sc: make([]float32, b.lOut*b.out), out: make([]float32, b.lOut*b.out),
			qx: newQuantized(b.lIn, b.in), qh1: newQuantized(b.lIn+2*b.conv2.pad, b.mid),
			qh2: newQuantized(b.lOut, b.mid), h1top: make([]float32, b.lIn),
		})
	}
	wk.acts = a
	return wk
}
