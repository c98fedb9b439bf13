package engine

import (
	"rgcpred/model"
	"rgcpred/rgc"
)

// FoldedConv is a convolution as the engine runs it: batch norm folded in,
// out[l, o] = Bias[o] + sum over (t, i) of in[l*Stride - Pad + t, i] *
// W[(t*Cin + i)*Cout + o], zero outside the input.
type FoldedConv struct {
	K, Stride, Pad, Cin, Cout int
	W                         []float32 // [K*Cin, Cout]
	Bias                      []float32 // [Cout]
}

// FoldedLinear is y = x W + Bias with W [In, Out], as the engine runs it
// (the attention's query columns already scaled by 1/sqrt(head_dim)).
type FoldedLinear struct {
	In, Out int
	W       []float32 // [In, Out]
	Bias    []float32 // [Out]
}

// PreparedBlock is a bottleneck block's prepared weights and sizes.
type PreparedBlock struct {
	Stride, In, Mid, Out, LIn, LOut int
	Conv1, Conv2, Conv3             FoldedConv
	Shortcut                        *FoldedConv // nil: identity
	SE1, SE2                        FoldedLinear
}

// PreparedLayer is a transformer block's prepared weights.
type PreparedLayer struct {
	LN1W, LN1B, LN2W, LN2B []float32
	QKV, Proj, FC, MProj   FoldedLinear
}

// Prepared is every weight of the forward pass in float32 as the engine
// computes with it (the fp32 path), for another implementation of the
// same pass (the GPU engine) to upload rather than fold again.
type Prepared struct {
	Config          model.Config
	Conv1, Conv2    FoldedConv
	Blocks          []PreparedBlock
	Proj            *FoldedLinear // nil unless Config.HasProj
	CellEmb, PosEmb []float32
	Layers          []PreparedLayer
	LNFW, LNFB      []float32
	Head            FoldedLinear
}

// Prepared returns copies of the engine's prepared weights.
func (e *Engine) Prepared() *Prepared {
	n := e.net
	cv := func(c *conv) FoldedConv {
		return FoldedConv{K: c.k, Stride: c.stride, Pad: c.pad, Cin: c.cin, Cout: c.cout,
			W: c.w.Dense(), Bias: append([]float32(nil), c.bias...)}
	}
	ln := func(f *linear) FoldedLinear {
		return FoldedLinear{In: f.in, Out: f.out, W: f.w.Dense(), Bias: append([]float32(nil), f.bias...)}
	}
	cp := func(x []float32) []float32 { return append([]float32(nil), x...) }
	p := &Prepared{Config: n.cfg, Conv1: cv(&n.conv1), Conv2: cv(&n.conv2),
		CellEmb: cp(n.cellEmb), PosEmb: cp(n.posEmb), LNFW: cp(n.lnfw), LNFB: cp(n.lnfb), Head: ln(&n.head)}
	for i := range n.blocks {
		b := &n.blocks[i]
		pb := PreparedBlock{Stride: b.stride, In: b.in, Mid: b.mid, Out: b.out, LIn: b.lIn, LOut: b.lOut,
			Conv1: cv(&b.conv1), Conv2: cv(&b.conv2), Conv3: cv(&b.conv3), SE1: ln(&b.se1), SE2: ln(&b.se2)}
		if b.shortcut != nil {
			sc := cv(b.shortcut)
			pb.Shortcut = &sc
		}
		p.Blocks = append(p.Blocks, pb)
	}
	if n.proj != nil {
		pr := ln(n.proj)
		p.Proj = &pr
	}
	for i := range n.layers {
		l := &n.layers[i]
		p.Layers = append(p.Layers, PreparedLayer{LN1W: cp(l.ln1w), LN1B: cp(l.ln1b), LN2W: cp(l.ln2w), LN2B: cp(l.ln2b),
			QKV: ln(&l.qkv), Proj: ln(&l.proj), FC: ln(&l.fc), MProj: ln(&l.mproj)})
	}
	return p
}

// Add adds one window's comparison of probabilities got (a faster path)
// with ref (float32) to p.
func (p *Parity) Add(ref, got []float32) { p.compare(ref, got) }

// ProbeWindows returns n synthetic windows for a parity check,
// reproducible from seed, cells taken in turn from the engine's (the
// windows SetPrecision checks).
func (e *Engine) ProbeWindows(n int, seed uint64) *rgc.Batch { return e.probeWindows(n, seed) }
