package gpu

import (
	"fmt"
	"sort"

	"rgcpred/base/cuda"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// Arenas: the device memory an operation's pointers fall in.
const (
	arenaWeights = iota // the prepared weights, uploaded once
	arenaActs           // inputs, activations and outputs of MaxBatch windows
	numArenas
)

// Ref is a region of an arena, in float32s: what an operation may read or
// write through one pointer argument.
type Ref struct {
	Arena    int // arenaWeights or arenaActs
	Off, Len int // first float and length
}

// argKind is the type of a kernel parameter.
type argKind int

const (
	argPtr argKind = iota // a device pointer (float* or int*)
	argInt                // a 32-bit int
)

// kernelSigs lists every kernel of kernels.cu with its parameters' kinds,
// in order (TestKernelSignatures checks them against the source).
var kernelSigs = map[string][]argKind{
	"im2col":       {argPtr, argPtr, argInt, argInt, argInt, argInt, argInt, argInt, argInt, argInt, argInt},
	"biasAct":      {argPtr, argPtr, argInt, argInt, argInt},
	"biasResidual": {argPtr, argPtr, argPtr, argInt, argInt},
	"sePool":       {argPtr, argPtr, argInt, argInt},
	"seGate":       {argPtr, argPtr, argPtr, argPtr, argPtr, argPtr, argInt, argInt},
	"seApply":      {argPtr, argPtr, argPtr, argPtr, argInt, argInt},
	"embed":        {argPtr, argPtr, argPtr, argPtr, argPtr, argPtr, argInt, argInt},
	"layerNorm":    {argPtr, argPtr, argPtr, argPtr, argInt, argInt, argInt, argInt},
	"attention":    {argPtr, argPtr, argInt, argInt},
}

// kernelNames returns the kernels' names, sorted.
func kernelNames() []string {
	var ns []string
	for n := range kernelSigs {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Arg is one kernel argument: a region (a pointer to its first element),
// a null pointer, or an int.
type Arg struct {
	Ref  *Ref // a pointer to the region's first float
	Null bool // a null pointer
	Int  int  // else an int
}

// Gemm is C = A W (row-major; cuda.BLAS.Gemm): A m x k with row stride
// Lda, W k x n with row stride Ldw, C m x n with row stride Ldc.
type Gemm struct {
	M, N, K       int // C is M x N; the sum runs over K
	A, W, C       Ref // the operands' regions
	Lda, Ldw, Ldc int // row strides
}

// Op is one step of the forward pass: a kernel launch or a cuBLAS GEMM.
type Op struct {
	Layer  string // the model layer it belongs to, e.g. "cnn.blocks.0.conv2"
	Kernel string // a kernel of kernels.cu, or "gemm"
	Grid   cuda.Dim3
	Block  cuda.Dim3
	Shared int // dynamic shared memory, bytes
	Args   []Arg
	Gemm   *Gemm
	Out    Ref // the region it writes
}

// CUDA's launch limits (every architecture since sm_30), and the dynamic
// shared memory a kernel gets without opting in to more.
const (
	maxGridX      = 1<<31 - 1
	maxGridYZ     = 65535
	maxBlock      = 1024
	maxSharedDflt = 48 << 10
)

// maxElems is the most floats one region may hold: the kernels and
// cuBLAS count elements in 32-bit ints.
const maxElems = 1<<31 - 1

// checkLaunch reports a kernel launch outside CUDA's limits or the shape
// the kernels assume (a one-dimensional block), or a region too large for
// 32-bit element counts.
func (op *Op) checkLaunch() error {
	refs := []Ref{op.Out}
	for _, a := range op.Args {
		if a.Ref != nil {
			refs = append(refs, *a.Ref)
		}
	}
	if g := op.Gemm; g != nil {
		refs = append(refs, g.A, g.W, g.C)
	}
	for _, r := range refs {
		if r.Len > maxElems {
			return fmt.Errorf("gpu: %s (%s): a region of %d floats, over the %d of 32-bit counts", op.Layer, op.Kernel, r.Len, maxElems)
		}
	}
	if op.Gemm != nil {
		return nil
	}
	g, b := op.Grid, op.Block
	if g.X < 1 || g.Y < 1 || g.Z != 1 || g.X > maxGridX || g.Y > maxGridYZ ||
		b.X < 1 || b.X > maxBlock || b.Y != 1 || b.Z != 1 || op.Shared < 0 || op.Shared > maxSharedDflt {
		return fmt.Errorf("gpu: %s (%s): grid %v, block %v, %d bytes of shared memory: outside CUDA's limits or the kernels' one-dimensional blocks",
			op.Layer, op.Kernel, g, b, op.Shared)
	}
	return nil
}

// batchLimit is the largest batch an engine of p runs in one pass: every
// activation buffer of that many windows within maxElems floats, and the
// windows of a launch (a grid's y) within CUDA's 65,535. The first
// bottleneck's first convolution's output decides for the paper CNN
// (512 positions x 128 channels, 65,536 floats a window: 32,767 windows).
func batchLimit(p *engine.Prepared) int {
	n := newNet(p, 1)
	per := 1
	for _, b := range n.lay.bufs {
		if b.fixed == 0 {
			per = max(per, b.per)
		}
	}
	return min(maxGridYZ, maxElems/per)
}

// colBudget is the most floats of one im2col pass (64 MiB): its windows'
// unrolled rows are written and read back by the GEMM at once, and beyond
// it a batch is unrolled in parts. One window of the paper CNN unrolls to
// at most 229,376 floats: 73 windows a pass.
const colBudget = 1 << 24

// Activation codes of biasAct.
const (
	actNone = 0
	actReLU = 1
	actGELU = 2
)

// buf is an activation buffer: per window floats, at an offset of the
// activations arena sized for MaxBatch windows (or for a fixed number of
// windows: fixed > 0).
type buf struct {
	name  string
	per   int
	off   int
	fixed int
}

// layout places the activation buffers of maxBatch windows.
type layout struct {
	maxBatch int
	bufs     []*buf
	total    int // floats
}

// align is the alignment of every region, in floats (256 bytes: cuBLAS
// and coalesced loads).
const align = 64

func (l *layout) add(name string, per int) *buf { return l.addFor(name, per, 0) }

// addFor places a buffer for fixed windows (0: maxBatch).
func (l *layout) addFor(name string, per, fixed int) *buf {
	b := &buf{name: name, per: per, off: l.total, fixed: fixed}
	l.bufs = append(l.bufs, b)
	l.total += (b.windows(l.maxBatch)*per + align - 1) / align * align
	return b
}

// windows is the number of windows b holds in a layout for maxBatch.
func (b *buf) windows(maxBatch int) int {
	if b.fixed > 0 {
		return b.fixed
	}
	return maxBatch
}

// ref is the region of b's first n windows.
func (b *buf) ref(n int) Ref { return Ref{Arena: arenaActs, Off: b.off, Len: n * b.per} }

// refAt is the region of b's first n windows from float at of the first.
func (b *buf) refAt(n, at int) Ref {
	return Ref{Arena: arenaActs, Off: b.off + at, Len: n*b.per - at}
}

// weights places the prepared weights in one arena.
type weights struct {
	data []float32
}

// put appends x, aligned, and returns its region.
func (w *weights) put(x []float32) Ref {
	off := len(w.data)
	w.data = append(w.data, x...)
	for len(w.data)%align != 0 {
		w.data = append(w.data, 0)
	}
	return Ref{Arena: arenaWeights, Off: off, Len: len(x)}
}

// convW and linW are a convolution's and a linear layer's weights in the
// arena.
type convW struct {
	c       engine.FoldedConv
	w, bias Ref
}

type linW struct {
	l       engine.FoldedLinear
	w, bias Ref
}

type blockW struct {
	b                   engine.PreparedBlock
	conv1, conv2, conv3 convW
	shortcut            *convW
	se1, se2            linW
}

type layerW struct {
	ln1w, ln1b, ln2w, ln2b Ref
	qkv, proj, fc, mproj   linW
}

// net is the prepared network: weights in their arena and the activation
// buffers' layout.
type net struct {
	p      *engine.Prepared
	w      weights
	conv1  convW
	conv2  convW
	blocks []blockW
	proj   *linW
	cell   Ref
	pos    Ref
	layers []layerW
	lnfw   Ref
	lnfb   Ref
	head   linW

	lay                       *layout
	colWindows                int // windows of one im2col pass (colBudget)
	in, rows, col, c1, c2     *buf
	h1, h2, h3, sc, out, pool []*buf // per block; sc nil without shortcut
	gate                      []*buf
	x, h, qkv, y, tmp, mlp    *buf
	last, logits              *buf
	tokens, width, headOut    int
}

func newNet(p *engine.Prepared, maxBatch int) *net {
	n := &net{p: p}
	c := p.Config
	cv := func(f engine.FoldedConv) convW { return convW{c: f, w: n.w.put(f.W), bias: n.w.put(f.Bias)} }
	lw := func(f engine.FoldedLinear) linW { return linW{l: f, w: n.w.put(f.W), bias: n.w.put(f.Bias)} }
	n.conv1, n.conv2 = cv(p.Conv1), cv(p.Conv2)
	for _, b := range p.Blocks {
		bw := blockW{b: b, conv1: cv(b.Conv1), conv2: cv(b.Conv2), conv3: cv(b.Conv3), se1: lw(b.SE1), se2: lw(b.SE2)}
		if b.Shortcut != nil {
			s := cv(*b.Shortcut)
			bw.shortcut = &s
		}
		n.blocks = append(n.blocks, bw)
	}
	if p.Proj != nil {
		pr := lw(*p.Proj)
		n.proj = &pr
	}
	n.cell, n.pos = n.w.put(p.CellEmb), n.w.put(p.PosEmb)
	for _, l := range p.Layers {
		n.layers = append(n.layers, layerW{ln1w: n.w.put(l.LN1W), ln1b: n.w.put(l.LN1B), ln2w: n.w.put(l.LN2W), ln2b: n.w.put(l.LN2B),
			qkv: lw(l.QKV), proj: lw(l.Proj), fc: lw(l.FC), mproj: lw(l.MProj)})
	}
	n.lnfw, n.lnfb = n.w.put(p.LNFW), n.w.put(p.LNFB)
	n.head = lw(p.Head)

	// Activations.
	T, d := c.Tokens(), c.Width()
	n.tokens, n.width, n.headOut = T, d, c.HeadOut()
	l := &layout{maxBatch: maxBatch}
	n.lay = l
	n.in = l.add("input", rgc.WindowLen)
	n.rows = l.add("rows", 1)
	col := p.Conv1.K * p.Conv1.Cin * (c.InBins / p.Conv1.Stride)
	col = max(col, p.Conv2.K*p.Conv2.Cin*(c.InBins/p.Conv1.Stride))
	for _, b := range p.Blocks {
		col = max(col, b.Conv2.K*b.Conv2.Cin*b.LOut)
	}
	n.colWindows = max(1, min(maxBatch, colBudget/col))
	n.col = l.addFor("im2col", col, n.colWindows)
	stem := c.InBins / p.Conv1.Stride
	n.c1 = l.add("cnn.conv1", stem*c.StemCh)
	n.c2 = l.add("cnn.conv2", stem*c.StemCh)
	for i, b := range p.Blocks {
		pre := fmt.Sprintf("cnn.blocks.%d.", i)
		n.h1 = append(n.h1, l.add(pre+"conv1", b.LIn*b.Mid))
		n.h2 = append(n.h2, l.add(pre+"conv2", b.LOut*b.Mid))
		n.h3 = append(n.h3, l.add(pre+"conv3", b.LOut*b.Out))
		var sc *buf
		if b.Shortcut != nil {
			sc = l.add(pre+"shortcut", b.LOut*b.Out)
		}
		n.sc = append(n.sc, sc)
		n.pool = append(n.pool, l.add(pre+"se.pool", b.Out))
		n.gate = append(n.gate, l.add(pre+"se.gate", b.Out))
		n.out = append(n.out, l.add(pre+"out", b.LOut*b.Out))
	}
	n.x = l.add("gpt.x", T*d)
	n.h = l.add("gpt.h", T*d)
	n.qkv = l.add("gpt.qkv", T*3*d)
	n.y = l.add("gpt.y", T*d)
	n.tmp = l.add("gpt.tmp", T*d)
	n.mlp = l.add("gpt.mlp", T*4*d)
	n.last = l.add("gpt.ln_f", d)
	n.logits = l.add("head", n.headOut)
	return n
}

// Threads per block of the elementwise kernels.
const threads = 256

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func ptr(r Ref) Arg     { return Arg{Ref: &r} }
func integer(v int) Arg { return Arg{Int: v} }

// plan returns the operations of a forward pass of nb windows, in order.
func (n *net) plan(nb int) []Op {
	c := n.p.Config
	var ops []Op
	gemm := func(layer string, m, nn, k int, a Ref, lda int, w Ref, ldw int, cr Ref, ldc int) {
		ops = append(ops, Op{Layer: layer, Kernel: "gemm", Gemm: &Gemm{M: m, N: nn, K: k, A: a, Lda: lda, W: w, Ldw: ldw, C: cr, Ldc: ldc}, Out: cr})
	}
	biasAct := func(layer string, y Ref, rows, cols int, bias Ref, act int) {
		ops = append(ops, Op{Layer: layer, Kernel: "biasAct", Grid: cuda.Dim3{X: ceilDiv(rows*cols, threads), Y: 1, Z: 1},
			Block: cuda.Dim3{X: threads, Y: 1, Z: 1}, Args: []Arg{ptr(y), ptr(bias), integer(rows), integer(cols), integer(act)}, Out: y})
	}
	// conv runs a folded convolution of the input in (element (b, j, i) at
	// b*winStride + j*posStride + i*chStride) into out [lout][cout].
	conv := func(layer string, cw convW, in Ref, lin, winStride, posStride, chStride int, out *buf, act int) {
		f := cw.c
		lout := (lin+2*f.Pad-f.K)/f.Stride + 1
		rows := nb * lout
		switch {
		case f.K == 1 && f.Pad == 0 && chStride == 1 && posStride == f.Cin && winStride == lin*f.Cin:
			// A 1x1 convolution of channels-last rows is a GEMM on them;
			// with stride s, row l of window b is row (b*lout + l)*s.
			gemm(layer, rows, f.Cout, f.Cin, in, f.Stride*f.Cin, cw.w, f.Cout, out.ref(nb), f.Cout)
		default:
			// im2col and its GEMM run on at most colWindows windows at a
			// time, so that the unrolled rows stay within colBudget.
			per := lout * f.K * f.Cin
			dst := out.ref(nb)
			for w0 := 0; w0 < nb; w0 += n.colWindows {
				k := min(n.colWindows, nb-w0)
				src := Ref{Arena: in.Arena, Off: in.Off + w0*winStride, Len: k * winStride}
				col := n.col.ref(k)
				col.Len = k * per
				part := Ref{Arena: dst.Arena, Off: dst.Off + w0*lout*f.Cout, Len: k * lout * f.Cout}
				ops = append(ops, Op{Layer: layer, Kernel: "im2col", Grid: cuda.Dim3{X: ceilDiv(per, threads), Y: k, Z: 1},
					Block: cuda.Dim3{X: threads, Y: 1, Z: 1},
					Args: []Arg{ptr(src), ptr(col), integer(lin), integer(f.Cin), integer(winStride), integer(posStride), integer(chStride),
						integer(lout), integer(f.K), integer(f.Stride), integer(f.Pad)}, Out: col})
				gemm(layer, k*lout, f.Cout, f.K*f.Cin, col, f.K*f.Cin, cw.w, f.Cout, part, f.Cout)
			}
		}
		biasAct(layer, out.ref(nb), rows, f.Cout, cw.bias, act)
	}

	// CNN encoder: the raw windows [5][1024] are read in place.
	stem := c.InBins / n.conv1.c.Stride
	conv("cnn.conv1", n.conv1, n.in.ref(nb), c.InBins, rgc.WindowLen, 1, c.InBins, n.c1, actReLU)
	conv("cnn.conv2", n.conv2, n.c1.ref(nb), stem, stem*c.StemCh, c.StemCh, 1, n.c2, actReLU)
	x, lin := n.c2, stem
	for i, bw := range n.blocks {
		b := bw.b
		pre := fmt.Sprintf("cnn.blocks.%d.", i)
		conv(pre+"conv1", bw.conv1, x.ref(nb), lin, lin*b.In, b.In, 1, n.h1[i], actReLU)
		conv(pre+"conv2", bw.conv2, n.h1[i].ref(nb), lin, lin*b.Mid, b.Mid, 1, n.h2[i], actReLU)
		conv(pre+"conv3", bw.conv3, n.h2[i].ref(nb), b.LOut, b.LOut*b.Mid, b.Mid, 1, n.h3[i], actNone)
		sc := x
		if bw.shortcut != nil {
			conv(pre+"shortcut", *bw.shortcut, x.ref(nb), lin, lin*b.In, b.In, 1, n.sc[i], actNone)
			sc = n.sc[i]
		}
		ops = append(ops,
			Op{Layer: pre + "se", Kernel: "sePool", Grid: cuda.Dim3{X: nb, Y: 1, Z: 1}, Block: cuda.Dim3{X: b.Out, Y: 1, Z: 1},
				Args: []Arg{ptr(n.h3[i].ref(nb)), ptr(n.pool[i].ref(nb)), integer(b.LOut), integer(b.Out)}, Out: n.pool[i].ref(nb)},
			Op{Layer: pre + "se", Kernel: "seGate", Grid: cuda.Dim3{X: nb, Y: 1, Z: 1}, Block: cuda.Dim3{X: b.Out, Y: 1, Z: 1}, Shared: 4 * b.SE1.Out,
				Args: []Arg{ptr(n.pool[i].ref(nb)), ptr(bw.se1.w), ptr(bw.se1.bias), ptr(bw.se2.w), ptr(bw.se2.bias), ptr(n.gate[i].ref(nb)),
					integer(b.Out), integer(b.SE1.Out)}, Out: n.gate[i].ref(nb)},
			Op{Layer: pre + "out", Kernel: "seApply", Grid: cuda.Dim3{X: ceilDiv(b.LOut*b.Out, threads), Y: nb, Z: 1}, Block: cuda.Dim3{X: threads, Y: 1, Z: 1},
				Args: []Arg{ptr(n.h3[i].ref(nb)), ptr(n.gate[i].ref(nb)), ptr(sc.ref(nb)), ptr(n.out[i].ref(nb)), integer(b.LOut), integer(b.Out)},
				Out:  n.out[i].ref(nb)})
		x, lin = n.out[i], b.LOut
	}

	// Transformer: tokens are the encoder's positions.
	T, d := n.tokens, n.width
	rows := nb * T
	src, bias := x.ref(nb), Arg{Null: true}
	if n.proj != nil {
		gemm("gpt.proj", rows, d, n.proj.l.In, x.ref(nb), n.proj.l.In, n.proj.w, d, n.tmp.ref(nb), d)
		src, bias = n.tmp.ref(nb), ptr(n.proj.bias)
	}
	ops = append(ops, Op{Layer: "gpt.embed", Kernel: "embed", Grid: cuda.Dim3{X: ceilDiv(T*d, threads), Y: nb, Z: 1}, Block: cuda.Dim3{X: threads, Y: 1, Z: 1},
		Args: []Arg{ptr(src), ptr(n.x.ref(nb)), bias, ptr(n.pos), ptr(n.cell), ptr(n.rows.ref(nb)), integer(T), integer(d)}, Out: n.x.ref(nb)})
	lnWarps := threads / 32
	layerNorm := func(layer string, xr Ref, y Ref, w, b Ref, rows, xStride, yStride int) {
		ops = append(ops, Op{Layer: layer, Kernel: "layerNorm", Grid: cuda.Dim3{X: ceilDiv(rows, lnWarps), Y: 1, Z: 1}, Block: cuda.Dim3{X: threads, Y: 1, Z: 1},
			Args: []Arg{ptr(xr), ptr(y), ptr(w), ptr(b), integer(rows), integer(d), integer(xStride), integer(yStride)}, Out: y})
	}
	linear := func(layer string, lw linW, a Ref, out Ref, rows, act int) {
		gemm(layer, rows, lw.l.Out, lw.l.In, a, lw.l.In, lw.w, lw.l.Out, out, lw.l.Out)
		biasAct(layer, out, rows, lw.l.Out, lw.bias, act)
	}
	residual := func(layer string, lw linW, a Ref) {
		gemm(layer, rows, lw.l.Out, lw.l.In, a, lw.l.In, lw.w, lw.l.Out, n.tmp.ref(nb), lw.l.Out)
		ops = append(ops, Op{Layer: layer, Kernel: "biasResidual", Grid: cuda.Dim3{X: ceilDiv(rows*d, threads), Y: 1, Z: 1},
			Block: cuda.Dim3{X: threads, Y: 1, Z: 1}, Args: []Arg{ptr(n.x.ref(nb)), ptr(n.tmp.ref(nb)), ptr(lw.bias), integer(rows), integer(d)}, Out: n.x.ref(nb)})
	}
	for i, lw := range n.layers {
		pre := fmt.Sprintf("gpt.blocks.%d.", i)
		layerNorm(pre+"ln1", n.x.ref(nb), n.h.ref(nb), lw.ln1w, lw.ln1b, rows, d, d)
		linear(pre+"attn.qkv", lw.qkv, n.h.ref(nb), n.qkv.ref(nb), rows, actNone)
		ops = append(ops, Op{Layer: pre + "attn", Kernel: "attention", Grid: cuda.Dim3{X: c.Heads, Y: nb, Z: 1}, Block: cuda.Dim3{X: T, Y: 1, Z: 1},
			Shared: 4 * 2 * T * c.HeadDim, Args: []Arg{ptr(n.qkv.ref(nb)), ptr(n.y.ref(nb)), integer(T), integer(d)}, Out: n.y.ref(nb)})
		residual(pre+"attn.proj", lw.proj, n.y.ref(nb))
		layerNorm(pre+"ln2", n.x.ref(nb), n.h.ref(nb), lw.ln2w, lw.ln2b, rows, d, d)
		linear(pre+"mlp.fc", lw.fc, n.h.ref(nb), n.mlp.ref(nb), rows, actGELU)
		residual(pre+"mlp.proj", lw.mproj, n.mlp.ref(nb))
	}
	// The head reads the last token of each window.
	layerNorm("gpt.ln_f", n.x.refAt(nb, (T-1)*d), n.last.ref(nb), n.lnfw, n.lnfb, nb, T*d, d)
	linear("head", n.head, n.last.ref(nb), n.logits.ref(nb), nb, actNone)
	return ops
}

// buckets returns the batch sizes that have a plan (and a CUDA graph):
// the powers of two below maxBatch, and maxBatch.
func buckets(maxBatch int) []int {
	var bs []int
	for b := 1; b < maxBatch; b *= 2 {
		bs = append(bs, b)
	}
	return append(bs, maxBatch)
}

// The kernels' compile-time constants, as emulate uses them.
const (
	lnEps      = model.LNEps
	gelucubic  = model.GELUCubic
	maxHeadDim = 32 // the largest RGC_HEAD_DIM kernels.cu takes
)
