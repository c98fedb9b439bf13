// Package graph builds the spike-prediction network (docs/model.md
// section 2) as a gorgonia expression graph for training: the forward pass
// of model.Config with its weights bound by name, the loss of either head,
// and the gradients of every trainable weight by gorgonia's symbolic
// differentiation.
//
// The layers run as gorgonia operations backed by hand-written kernels
// (SGEMM convolution, batch norm, squeeze-excite, causal attention,
// layer norm, GELU, embeddings, the two heads' losses); each kernel supplies
// its local vector-Jacobian products and gorgonia's Grad chains them. The
// weight tensors of the graph share memory with model.Weights, so an
// optimiser updating the Weights updates the graph, and batch-norm running
// statistics updated by a training step land in the Weights.
package graph

import (
	"fmt"
	"math"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"rgcpred/model"
)

// Options select the graph's mode.
type Options struct {
	// Training uses batch statistics in batch norm (updating the running
	// statistics) and builds the gradient of the loss.
	Training bool
	// Threads is the number of goroutines the heavy kernels use (>= 1).
	Threads int
	// GorgoniaConv runs the convolutions with gorgonia's own Conv2d (kernel
	// height 1) instead of the im2col + SGEMM kernel; for benchmarks.
	GorgoniaConv bool

	// Profile records the wall time of every kernel (see Graph.Profile).
	Profile bool

	// BF16 runs every GEMM (convolutions, linear layers, attention; forward
	// and backward) in bfloat16 arithmetic: both operands rounded to
	// bfloat16, products summed in float32 (sgemm.GemmWorkBF16,
	// sgemm.PackBIntoBF16), on the AVX512_BF16 kernels where the CPU has
	// them (sgemm.BF16Native). The weights, their gradients' sums, and every
	// other operation stay float32. Not with GorgoniaConv.
	BF16 bool

	// SoftTargets makes the cat head's loss the cross-entropy against a
	// target distribution per window (Graph.SetTargetDist; SetInputs
	// writes the one-hot distribution of its classes, the same loss as
	// without this option). For distillation from a teacher; cat head only.
	SoftTargets bool

	// smooth replaces ReLU by softplus (tests only: finite differences
	// across ReLU kinks are inexact).
	smooth bool
	// frozenBN makes batch norm use its running statistics in training
	// too (tests only: the gradients of the float64 reference's inference
	// mode).
	frozenBN bool
}

// Graph is the model for a fixed batch size, ready to run.
type Graph struct {
	cfg   model.Config
	w     *model.Weights
	batch int
	opts  Options

	g      *G.ExprGraph
	params map[string]*G.Node
	grads  map[string]*G.Node
	names  []string // trainable parameter names, in Config.Params order

	prof         *opTimes
	x, cell, tgt *tensor.Dense
	out, loss    *G.Node
	ex           *executor
	team         *team // helpers of the parallel sections; nil for one thread
}

// New builds the graph for w's configuration and batch size batch. The
// graph reads and (in training, for batch-norm running statistics) writes
// w's tensors directly.
func New(w *model.Weights, batch int, opts Options) (*Graph, error) {
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	if batch < 1 {
		return nil, fmt.Errorf("graph: batch %d < 1", batch)
	}
	if opts.Threads < 1 {
		opts.Threads = 1
	}
	if opts.BF16 && opts.GorgoniaConv {
		return nil, fmt.Errorf("graph: bf16 needs the graph's own convolutions, not gorgonia's")
	}
	c := w.Config
	gr := &Graph{cfg: c, w: w, batch: batch, opts: opts, g: G.NewGraph(),
		params: make(map[string]*G.Node), grads: make(map[string]*G.Node)}
	for _, p := range c.Params() {
		t := tensor.New(tensor.WithBacking(w.Tensors[p.Name]), tensor.WithShape(p.Shape...))
		gr.params[p.Name] = G.NewTensor(gr.g, G.Float32, len(p.Shape), G.WithShape(p.Shape...), G.WithName(p.Name), G.WithValue(t))
		if p.Kind != model.KindStat {
			gr.names = append(gr.names, p.Name)
		}
	}
	gr.x = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, c.InRows, c.InBins))
	gr.cell = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch))
	if opts.SoftTargets && c.Head != model.HeadCat {
		return nil, fmt.Errorf("graph: soft targets need the cat head, not %s", c.Head)
	}
	tgtShape := tensor.Shape{batch}
	if opts.SoftTargets {
		tgtShape = tensor.Shape{batch, c.Classes}
	}
	gr.tgt = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(tgtShape...))
	xn := G.NewTensor(gr.g, G.Float32, 3, G.WithShape(batch, c.InRows, c.InBins), G.WithName("input"), G.WithValue(gr.x))
	cn := G.NewVector(gr.g, G.Float32, G.WithShape(batch), G.WithName("cell_index"), G.WithValue(gr.cell))
	tn := G.NewTensor(gr.g, G.Float32, len(tgtShape), G.WithShape(tgtShape...), G.WithName("target"), G.WithValue(gr.tgt))

	if opts.Profile {
		gr.prof = &opTimes{m: map[string]time.Duration{}}
	}
	gr.team = teamFor(gr, opts.Threads)
	par := parallel{n: opts.Threads, t: gr.team}
	b := builder{gr: gr, par: par, gemm: newGemmTeam(par, opts.BF16)}
	out := b.forward(xn, cn)
	var nll *G.Node
	switch {
	case opts.SoftTargets:
		nll = b.op(catCE{}, "nll", out, tn)
	case c.Head == model.HeadLogMix:
		nll = b.op(logMixNLL{m: c.Mixtures, horizon: c.Classes - 1}, "nll", out, tn)
	default:
		nll = b.op(catNLL{}, "nll", out, tn)
	}
	loss := b.op(meanAll{}, "loss", nll)
	if b.err != nil {
		return nil, fmt.Errorf("graph: build %s: %w", c.Name(), b.err)
	}
	gr.out, gr.loss = out, loss
	if opts.Training {
		wrt := make(G.Nodes, len(gr.names))
		for i, n := range gr.names {
			wrt[i] = gr.params[n]
		}
		// The loss is a one-element tensor (kept out of gorgonia's scalar
		// operations, which allocate on every run): its gradient is a
		// constant one.
		one := G.NewTensor(gr.g, G.Float32, 1, G.WithShape(1), G.WithName("dloss"),
			G.WithValue(tensor.New(tensor.WithBacking([]float32{1}), tensor.WithShape(1))))
		gs, err := G.Backpropagate(G.Nodes{loss}, G.Nodes{one}, wrt)
		if err != nil {
			return nil, fmt.Errorf("graph: gradients of %s: %w", c.Name(), err)
		}
		for i, n := range gr.names {
			gr.grads[n] = gs[i]
		}
	}
	roots := G.Nodes{out, loss}
	for _, n := range gr.grads {
		roots = append(roots, n)
	}
	ex, err := newExecutor(gr.g, b.par, roots)
	if err != nil {
		return nil, err
	}
	gr.ex = ex
	return gr, nil
}

// builder adds layers to a graph, keeping the first error.
type builder struct {
	gr   *Graph
	par  parallel
	gemm *gemmTeam
	err  error
}

func (b *builder) p(name string) *G.Node { return b.gr.params[name] }

func (b *builder) op(k kernel, name string, in ...*G.Node) *G.Node {
	if b.err != nil {
		return nil
	}
	n, err := apply(b.gr.prof, k, name, in...)
	b.err = err
	return n
}

func (b *builder) gop(f func() (*G.Node, error)) *G.Node {
	if b.err != nil {
		return nil
	}
	n, err := f()
	b.err = err
	return n
}

func (b *builder) relu(x *G.Node) *G.Node {
	if b.gr.opts.smooth {
		return b.op(softplus{}, "softplus", x)
	}
	return b.op(&relu{par: b.par}, "relu", x)
}

func (b *builder) add(x, y *G.Node) *G.Node {
	return b.gop(func() (*G.Node, error) { return G.Add(x, y) })
}

func (b *builder) conv(x *G.Node, l model.Layer, stride, pad int) *G.Node {
	if b.gr.opts.GorgoniaConv {
		return b.gorgoniaConv(x, l, stride, pad)
	}
	return b.op(&conv1d{stride: stride, pad: pad, par: b.par, gemm: b.gemm}, string(l), x, b.p(l.Weight()))
}

// gorgoniaConv is the baseline: gorgonia's Conv2d on [B, C, 1, L].
func (b *builder) gorgoniaConv(x *G.Node, l model.Layer, stride, pad int) *G.Node {
	name := string(l)
	return b.gop(func() (*G.Node, error) {
		xs, ws := x.Shape(), b.p(l.Weight()).Shape()
		x4, err := G.Reshape(x, tensor.Shape{xs[0], xs[1], 1, xs[2]})
		if err != nil {
			return nil, fmt.Errorf("gorgonia conv %s: %w", name, err)
		}
		w4, err := G.Reshape(b.p(l.Weight()), tensor.Shape{ws[0], ws[1], 1, ws[2]})
		if err != nil {
			return nil, fmt.Errorf("gorgonia conv %s: %w", name, err)
		}
		y, err := G.Conv2d(x4, w4, tensor.Shape{1, ws[2]}, []int{0, pad}, []int{1, stride}, []int{1, 1})
		if err != nil {
			return nil, fmt.Errorf("gorgonia conv %s: %w", name, err)
		}
		ys := y.Shape()
		return G.Reshape(y, tensor.Shape{ys[0], ys[1], ys[3]})
	})
}

// batchNorm returns a batch-norm kernel in the graph's mode.
func (b *builder) batchNorm() batchNorm {
	return batchNorm{training: b.gr.opts.Training && !b.gr.opts.frozenBN, eps: model.BNEps, momentum: model.BNMomentum, par: b.par}
}

func (b *builder) bn(x *G.Node, l model.Layer) *G.Node {
	k := b.batchNorm()
	return b.op(&k, string(l), x, b.p(l.Weight()), b.p(l.Bias()), b.p(l.RunningMean()), b.p(l.RunningVar()))
}

// bnRelu is ReLU(BN(x)), fused unless ReLU is replaced for tests.
func (b *builder) bnRelu(x *G.Node, l model.Layer) *G.Node {
	if b.gr.opts.smooth {
		return b.relu(b.bn(x, l))
	}
	k := &bnReLU{bn: b.batchNorm()}
	return b.op(k, string(l), x, b.p(l.Weight()), b.p(l.Bias()), b.p(l.RunningMean()), b.p(l.RunningVar()))
}

func (b *builder) linear(x *G.Node, l model.Layer) *G.Node {
	return b.op(linear{gemm: b.gemm}, string(l), x, b.p(l.Weight()), b.p(l.Bias()))
}

func (b *builder) ln(x *G.Node, l model.Layer) *G.Node {
	return b.op(&layerNorm{eps: model.LNEps, par: b.par}, string(l), x, b.p(l.Weight()), b.p(l.Bias()))
}

// forward returns the head's output [B, HeadOut].
func (b *builder) forward(x, cell *G.Node) *G.Node {
	c := b.gr.cfg
	pad := c.StemKernel / 2
	h := b.bnRelu(b.conv(x, model.LayerConv1, 2, pad), model.LayerBN1)
	h = b.bnRelu(b.conv(h, model.LayerConv2, 1, pad), model.LayerBN2)
	for i := 0; i < c.NumBlocks(); i++ {
		h = b.block(h, i)
	}
	t := b.op(toTokens{}, "tokens", h)
	if c.HasProj() {
		t = b.linear(t, model.LayerProj)
	}
	t = b.op(embed{}, "embed", t, b.p(model.ParamPosEmb), b.p(model.ParamCellEmb), cell)
	for i := 0; i < c.Layers; i++ {
		// The head reads the last token alone, so the last block attends
		// from the last query only and runs its projection and MLP on that
		// token (its keys and values still need every token).
		last := i == c.Layers-1
		p := model.GPTBlock(i)
		a := b.ln(t, p.Sub("ln1"))
		a = b.linear(a, p.Sub("attn.qkv"))
		a = b.op(&attention{t: c.Tokens(), heads: c.Heads, hd: c.HeadDim, last: last, par: b.par, gemm: b.gemm}, string(p.Sub("attn")), a)
		a = b.linear(a, p.Sub("attn.proj"))
		if last {
			t = b.op(lastToken{t: c.Tokens()}, "last", t)
		}
		t = b.add(t, a)
		m := b.ln(t, p.Sub("ln2"))
		m = b.linear(m, p.Sub("mlp.fc"))
		m = b.op(&gelu{par: b.par}, string(p.Sub("mlp.gelu")), m)
		m = b.linear(m, p.Sub("mlp.proj"))
		t = b.add(t, m)
	}
	t = b.ln(t, model.LayerLNF)
	return b.linear(t, model.LayerHead)
}

// block is bottleneck block i: 1x1 -> BN -> ReLU -> k x k strided -> BN ->
// ReLU -> 1x1 -> BN -> squeeze-excite, plus the shortcut, then ReLU (He et
// al., "Deep residual learning", 2016; Hu et al., 2018).
func (b *builder) block(x *G.Node, i int) *G.Node {
	c := b.gr.cfg
	p := model.CNNBlock(i)
	s := c.BlockStride(i)
	h := b.bnRelu(b.conv(x, p.Sub("conv1"), 1, 0), p.Sub("bn1"))
	h = b.bnRelu(b.conv(h, p.Sub("conv2"), s, c.BlockKernel/2), p.Sub("bn2"))
	h = b.bn(b.conv(h, p.Sub("conv3"), 1, 0), p.Sub("bn3"))
	sq := b.op(meanLen{}, string(p.Sub("se.squeeze")), h)
	sq = b.relu(b.linear(sq, p.Sub("se.fc1")))
	sq = b.linear(sq, p.Sub("se.fc2"))
	sq = b.op(sigmoid{}, string(p.Sub("se.gate")), sq)
	sc := x
	if c.BlockHasShortcut(i) {
		sc = b.bn(b.conv(x, p.Sub("shortcut.conv"), s, 0), p.Sub("shortcut.bn"))
	}
	return b.relu(b.op(&exciteAdd{par: b.par}, string(p.Sub("se.scale")), h, sq, sc))
}

// Batch returns the graph's batch size.
func (gr *Graph) Batch() int { return gr.batch }

// Config returns the model configuration.
func (gr *Graph) Config() model.Config { return gr.cfg }

// SetInputs copies a batch into the graph: inputs [B][InRows][InBins],
// cell indices (rows of the cell embedding, 0..NumCells-1) and target
// classes (0..Classes-1; may be nil when only outputs are wanted).
func (gr *Graph) SetInputs(inputs []float32, cellIdx, targets []int) error {
	c := gr.cfg
	if len(inputs) != gr.batch*c.InRows*c.InBins || len(cellIdx) != gr.batch || (targets != nil && len(targets) != gr.batch) {
		return fmt.Errorf("graph: batch of %d inputs, %d cells, %d targets for batch size %d", len(inputs), len(cellIdx), len(targets), gr.batch)
	}
	copy(f32(gr.x), inputs)
	cs, ts := f32(gr.cell), f32(gr.tgt)
	if gr.opts.SoftTargets {
		clear(ts)
	}
	for i, ci := range cellIdx {
		if ci < 0 || ci >= c.NumCells {
			return fmt.Errorf("graph: cell index %d out of range [0,%d)", ci, c.NumCells)
		}
		cs[i] = float32(ci)
		cls := 0
		if targets != nil {
			if targets[i] < 0 || targets[i] >= c.Classes {
				return fmt.Errorf("graph: target class %d out of range [0,%d)", targets[i], c.Classes)
			}
			cls = targets[i]
		}
		if gr.opts.SoftTargets {
			if targets != nil {
				ts[i*c.Classes+cls] = 1
			}
		} else {
			ts[i] = float32(cls)
		}
	}
	return nil
}

// SetTargetDist replaces the batch's targets by distributions: p holds
// [B][Classes] probabilities, each row non-negative and summing to 1 (within
// 1e-3). Only for a graph built with Options.SoftTargets; call it after
// SetInputs.
func (gr *Graph) SetTargetDist(p []float32) error {
	c := gr.cfg
	if !gr.opts.SoftTargets {
		return fmt.Errorf("graph: target distributions need Options.SoftTargets")
	}
	if len(p) != gr.batch*c.Classes {
		return fmt.Errorf("graph: %d target probabilities for %d windows of %d classes", len(p), gr.batch, c.Classes)
	}
	for i := 0; i < gr.batch; i++ {
		var sum float64
		for k, v := range p[i*c.Classes : (i+1)*c.Classes] {
			if !(v >= 0 && v <= 1) {
				return fmt.Errorf("graph: window %d: target probability %v of class %d is not in [0, 1]", i, v, k)
			}
			sum += float64(v)
		}
		if math.Abs(sum-1) > 1e-3 {
			return fmt.Errorf("graph: window %d: target probabilities sum to %.6f, want 1", i, sum)
		}
	}
	copy(f32(gr.tgt), p)
	return nil
}

// Run executes the graph once (forward, and backward in training) and
// returns the mean loss over the batch.
func (gr *Graph) Run() (float32, error) {
	gr.team.hold() // the helpers poll through the step's serial stretches
	defer gr.team.release()
	if err := gr.ex.run(); err != nil {
		return 0, fmt.Errorf("graph: run: %w", err)
	}
	return floats(gr.ex.value(gr.loss))[0], nil
}

// floats returns the float32 values of v, a float32 *tensor.Dense, in
// place (nil otherwise). Dense.Data would box them, an allocation per call.
func floats(v G.Value) []float32 {
	d, ok := v.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float32 {
		return nil
	}
	return f32(d)
}

// Output returns the head's outputs of the last run, [B][HeadOut] (logits
// for cat; mixture logits, means and log standard deviations for logmix).
// The slice is overwritten by the next run.
func (gr *Graph) Output() []float32 {
	return floats(gr.ex.value(gr.out))
}

// TrainableNames lists the trainable parameters (all but batch-norm
// running statistics), in Config.Params order.
func (gr *Graph) TrainableNames() []string { return gr.names }

// Grad returns the gradient of the mean loss with respect to the named
// trainable parameter after a training run (nil otherwise). The slice is
// overwritten by the next run.
func (gr *Graph) Grad(name string) []float32 {
	n, ok := gr.grads[name]
	if !ok {
		return nil
	}
	return floats(gr.ex.value(n))
}

// Profile returns the wall time spent in each kernel kind and direction
// ("conv1d fwd", "attention bwd", ...) since the graph was built; nil unless
// Options.Profile. Time outside these kernels is the executor's additions
// (the residual connections, and the sums of the gradients of nodes with
// several consumers) and its own loop.
func (gr *Graph) Profile() map[string]time.Duration {
	if gr.prof == nil {
		return nil
	}
	gr.prof.mu.Lock()
	defer gr.prof.mu.Unlock()
	m := make(map[string]time.Duration, len(gr.prof.m))
	for k, v := range gr.prof.m {
		m[k] = v
	}
	return m
}

// Close stops the graph's helper goroutines (Options.Threads - 1, started
// by its first parallel section). A closed graph still runs, on the
// calling goroutine alone.
func (gr *Graph) Close() error {
	gr.team.close()
	return nil
}
