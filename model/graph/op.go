package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"rgcpred/base/sgemm"
)

// kernel is one layer's maths on float32 tensors: a forward function and,
// for every differentiable input, the vector-Jacobian product. fwdOp and
// bwdOp wrap a kernel as gorgonia operations, so gorgonia's symbolic
// differentiation (Grad / Backpropagate) chains the kernels into the
// backward pass of the whole graph.
type kernel interface {
	// name identifies the kernel and its hyper-parameters (used for hashing).
	name() string
	// outShape returns the output shape for the input shapes.
	outShape(in []tensor.Shape) (tensor.Shape, error)
	// diffWRT reports which inputs are differentiable.
	diffWRT() []bool
	// forward writes the whole output.
	forward(in []*tensor.Dense, out []float32)
	// backward writes the whole gradient of input i given the forward inputs,
	// the forward output and the output gradient.
	backward(i int, in []*tensor.Dense, out, gout, gin []float32)
}

// f32 returns the float32 backing slice of a dense tensor.
func f32(t *tensor.Dense) []float32 { return t.Float32s() }

// tensorType is the gorgonia type of a float32 tensor with dims dimensions.
func tensorType(dims int) hm.Type {
	return G.TensorType{Dims: dims, Of: G.Float32}
}

func asDense(vs []G.Value, ts []*tensor.Dense) ([]*tensor.Dense, error) {
	ts = ts[:0]
	for i, v := range vs {
		d, ok := v.(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("input %d is %T, want *tensor.Dense", i, v)
		}
		if d.Dtype() != tensor.Float32 {
			return nil, fmt.Errorf("input %d has dtype %v, want float32", i, d.Dtype())
		}
		ts = append(ts, d)
	}
	return ts, nil
}

// buffer is an op-owned output tensor, reused across runs of the graph (each
// node has its own op value, so nothing else writes to it).
type buffer struct {
	t *tensor.Dense
}

func (b *buffer) get(s tensor.Shape) *tensor.Dense {
	if b.t != nil && b.t.Shape().Eq(s) {
		return b.t
	}
	b.t = tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(tensor.Float32))
	return b.t
}

// opTimes accumulates the wall time spent in kernels, by kernel kind and
// direction, when profiling is on.
type opTimes struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

func (p *opTimes) add(k kernel, dir string, t0 time.Time) {
	if p == nil {
		return
	}
	name := k.name()
	if i := strings.IndexByte(name, '('); i > 0 {
		name = name[:i]
	}
	p.mu.Lock()
	p.m[name+" "+dir] += time.Since(t0)
	p.mu.Unlock()
}

// fwdOp applies a kernel's forward function.
type fwdOp struct {
	prof   *opTimes
	k      kernel
	dims   []int // dimensions of each input
	odim   int   // dimensions of the output
	out    buffer
	ins    []*tensor.Dense // the inputs of the current call
	shapes []tensor.Shape  // their shapes when the output buffer was sized
}

func (op *fwdOp) Arity() int { return len(op.dims) }
func (op *fwdOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(op.dims)+1)
	for _, d := range op.dims {
		ts = append(ts, tensorType(d))
	}
	ts = append(ts, tensorType(op.odim))
	return hm.NewFnType(ts...)
}
func (op *fwdOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	ss, err := G.DimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.k.outShape(ss)
}
func (op *fwdOp) Do(vs ...G.Value) (G.Value, error) {
	in, err := asDense(vs, op.ins)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op.k.name(), err)
	}
	op.ins = in
	if op.out.t == nil || !op.sameInputs(in) {
		shapes := make([]tensor.Shape, len(in))
		for i, t := range in {
			shapes[i] = t.Shape()
		}
		s, err := op.k.outShape(shapes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.k.name(), err)
		}
		op.out.get(s)
		op.shapes = shapes
	}
	var t0 time.Time
	if op.prof != nil {
		t0 = time.Now()
	}
	out := op.out.t
	op.k.forward(in, f32(out))
	op.prof.add(op.k, "fwd", t0)
	return out, nil
}

// sameInputs reports whether the inputs have the shapes of the last call
// (always, within one graph; checked because it costs no allocation).
func (op *fwdOp) sameInputs(in []*tensor.Dense) bool {
	if len(in) != len(op.shapes) {
		return false
	}
	for i, t := range in {
		if !t.Shape().Eq(op.shapes[i]) {
			return false
		}
	}
	return true
}

func (op *fwdOp) ReturnsPtr() bool     { return false }
func (op *fwdOp) CallsExtern() bool    { return false }
func (op *fwdOp) OverwritesInput() int { return -1 }
func (op *fwdOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "fwd:%s:%p", op.k.name(), op)
}
func (op *fwdOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op *fwdOp) String() string { return op.k.name() }

func (op *fwdOp) DiffWRT(n int) []bool { return op.k.diffWRT() }

// SymDiff returns one bwdOp node per differentiable input.
func (op *fwdOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	ret := make(G.Nodes, len(inputs))
	children := append(append(G.Nodes{}, inputs...), output, grad)
	for i, d := range op.k.diffWRT() {
		if !d {
			continue
		}
		b := &bwdOp{prof: op.prof, k: op.k, i: i, dims: op.dims, odim: op.odim}
		n, err := G.ApplyOp(b, children...)
		if err != nil {
			return nil, fmt.Errorf("%s: gradient of input %d: %w", op.k.name(), i, err)
		}
		ret[i] = n
	}
	return ret, nil
}

// bwdOp computes the gradient of a kernel's input i; its inputs are the
// forward inputs, the forward output and the output gradient.
type bwdOp struct {
	prof *opTimes
	k    kernel
	i    int
	dims []int
	odim int
	out  buffer
	ins  []*tensor.Dense // the inputs of the current call
}

func (op *bwdOp) Arity() int { return len(op.dims) + 2 }
func (op *bwdOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(op.dims)+3)
	for _, d := range op.dims {
		ts = append(ts, tensorType(d))
	}
	ts = append(ts, tensorType(op.odim), tensorType(op.odim), tensorType(op.dims[op.i]))
	return hm.NewFnType(ts...)
}
func (op *bwdOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	ss, err := G.DimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return ss[op.i].Clone(), nil
}
func (op *bwdOp) Do(vs ...G.Value) (G.Value, error) {
	in, err := asDense(vs, op.ins)
	if err != nil {
		return nil, fmt.Errorf("d%s: %w", op.k.name(), err)
	}
	op.ins = in
	var t0 time.Time
	if op.prof != nil {
		t0 = time.Now()
	}
	n := len(op.dims)
	out := op.out.get(in[op.i].Shape())
	op.k.backward(op.i, in[:n], f32(in[n]), f32(in[n+1]), f32(out))
	op.prof.add(op.k, "bwd", t0)
	return out, nil
}
func (op *bwdOp) ReturnsPtr() bool     { return false }
func (op *bwdOp) CallsExtern() bool    { return false }
func (op *bwdOp) OverwritesInput() int { return -1 }
func (op *bwdOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "bwd%d:%s:%p", op.i, op.k.name(), op)
}
func (op *bwdOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op *bwdOp) String() string { return fmt.Sprintf("d%s/d%d", op.k.name(), op.i) }

// apply adds a kernel node to the graph.
func apply(prof *opTimes, k kernel, name string, inputs ...*G.Node) (*G.Node, error) {
	op := &fwdOp{prof: prof, k: k}
	shapes := make([]tensor.Shape, len(inputs))
	for i, n := range inputs {
		op.dims = append(op.dims, n.Dims())
		shapes[i] = n.Shape()
	}
	s, err := k.outShape(shapes)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, k.name(), err)
	}
	op.odim = len(s)
	n, err := G.ApplyOpWithName(op, name, inputs...)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, k.name(), err)
	}
	return n, nil
}

// gemmTeam runs a GEMM split over the workers of par, each with its own
// packing space (sgemm.GemmWork: no pool, no allocation). Each worker packs
// the whole of the operand it shares with the others, so the split is by
// rows of C when B is the smaller operand (n <= m) and by columns
// otherwise. One team serves every kernel of a graph: the executor runs one
// op at a time. With bf16 every GEMM of the team, and every packed B it
// makes (pack), is in bfloat16 arithmetic (Options.BF16).
type gemmTeam struct {
	par  parallel
	bf16 bool
	work [][]float32 // per worker, allocated on first use
	// blocks is the body of run's parallel section (see body); the
	// kernels call run between parallel sections, never inside one.
	blocks gemmBlocks
}

func newGemmTeam(par parallel, bf16 bool) *gemmTeam { return &gemmTeam{par: par, bf16: bf16} }

// scratchA prepares a, an operand A of packedA: in bf16, it rounds a's
// values to bfloat16 in place (a is the caller's copy).
func (t *gemmTeam) scratchA(a []float32) {
	if t != nil && t.bf16 {
		sgemm.RoundBF16(a)
	}
}

// packedA is sgemm.GemmPacked (alpha 1, A untransposed) for a B made by
// pack and an A prepared by scratchA: in bf16, A is read in place, rounded
// once however many rows read each value (a convolution's taps).
func (t *gemmTeam) packedA(m int, a []float32, lda int, b *sgemm.PackedB, beta float32, c []float32, ldc int, work []float32) {
	if t != nil && t.bf16 {
		sgemm.GemmPackedRoundedA(m, a, lda, b, beta, c, ldc, work)
		return
	}
	sgemm.GemmPacked(false, m, 1, a, lda, b, beta, c, ldc, work)
}

// gemmWork is sgemm.GemmWork in the team's arithmetic.
func (t *gemmTeam) gemmWork(work []float32, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if t.bf16 {
		sgemm.GemmWorkBF16(work, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemm.GemmWork(work, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// pack is sgemm.PackBInto in the team's arithmetic (a nil team: float32):
// sgemm.GemmPacked with the result multiplies in that arithmetic.
func (t *gemmTeam) pack(p *sgemm.PackedB, transB bool, k, n int, b []float32, ldb int) *sgemm.PackedB {
	if t != nil && t.bf16 {
		return sgemm.PackBIntoBF16(p, transB, k, n, b, ldb)
	}
	return sgemm.PackBInto(p, transB, k, n, b, ldb)
}

// Row and column blocks of C are whole tiles of every micro-kernel (6 x 16
// for AVX2, 12 x 32 for AVX-512, 4 x 4 for the portable one).
const (
	gemmRowAlign = 12
	gemmColAlign = 32
)

// run computes C = alpha op(A) op(B) + beta C as sgemm.Gemm does; a nil
// team runs sgemm.Gemm itself.
func (t *gemmTeam) run(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if t == nil {
		sgemm.Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	rows := n <= m
	align, size := gemmRowAlign, m
	if !rows {
		align, size = gemmColAlign, n
	}
	blocks := (size + align - 1) / align
	workers := min(max(t.par.n, 1), blocks)
	// Below this much work the hand-off costs more than it saves.
	if int64(m)*int64(n)*int64(k) < 1<<16 {
		workers = 1
	}
	t.reserve(workers)
	t.blocks = gemmBlocks{t: t, transA: transA, transB: transB, rows: rows, m: m, n: n, k: k, align: align, size: size,
		alpha: alpha, beta: beta, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
	parallel{n: workers, t: t.par.t}.run(blocks, &t.blocks)
}

// gemmBlocks is the parallel section of gemmTeam.run: blocks [lo, hi) of
// align rows (rows) or columns of C.
type gemmBlocks struct {
	t                    *gemmTeam
	transA, transB, rows bool
	m, n, k, align, size int
	alpha, beta          float32
	a, b, c              []float32
	lda, ldb, ldc        int
}

func (j *gemmBlocks) chunk(lo, hi, w int) {
	t, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc := j.t, j.transA, j.transB, j.m, j.n, j.k, j.alpha, j.a, j.lda, j.b, j.ldb, j.beta, j.c, j.ldc
	i0, i1 := lo*j.align, min(hi*j.align, j.size)
	if i0 >= i1 {
		return
	}
	if j.rows {
		aoff := i0 * lda
		if transA {
			aoff = i0
		}
		t.gemmWork(t.work[w], transA, transB, i1-i0, n, k, alpha, a[aoff:], lda, b, ldb, beta, c[i0*ldc:], ldc)
		return
	}
	boff := i0
	if transB {
		boff = i0 * ldb
	}
	t.gemmWork(t.work[w], transA, transB, m, i1-i0, k, alpha, a, lda, b[boff:], ldb, beta, c[i0:], ldc)
}

// reserve makes sure workers 0..n-1 have packing space; call it before a
// parallel section whose workers call on.
func (t *gemmTeam) reserve(n int) {
	if t == nil {
		return
	}
	n = max(n, 1)
	if len(t.work) < n {
		t.work = append(t.work, make([][]float32, n-len(t.work))...)
	}
	for w := range t.work[:n] {
		if len(t.work[w]) < sgemm.GemmWorkSize() {
			t.work[w] = make([]float32, sgemm.GemmWorkSize())
		}
	}
}

// on runs one GEMM (as sgemm.Gemm) on worker w's packing space, reserved
// before the parallel section; a nil team uses sgemm.Gemm's pool.
func (t *gemmTeam) on(w int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if t == nil {
		sgemm.Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	t.gemmWork(t.work[w], transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
