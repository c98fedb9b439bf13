package gpu

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"rgcpred/base/cuda"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// Precision names the arithmetic of the GPU engine's GEMMs (the other
// layers are float32 throughout).
type Precision string

const (
	// FP32 runs the GEMMs in float32 (cuBLAS pedantic math): parity with
	// the CPU engine's float32 within 1e-4.
	FP32 Precision = "fp32"
	// TF32 runs them on tensor cores with TF32 inputs (10-bit mantissas,
	// float32 sums), where probe windows pass engine.Parity's check
	// against FP32 at load (else the engine stays FP32).
	TF32 Precision = "tf32"
)

// ParsePrecision parses "fp32" or "tf32".
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case FP32, TF32:
		return p, nil
	}
	return "", fmt.Errorf("gpu: unknown precision %q (want %q or %q)", s, FP32, TF32)
}

// Options configure an Engine.
type Options struct {
	// MaxBatch is the largest batch of one pass (at least 1); larger
	// batches run in chunks of it. An engine takes at most its
	// configuration's limit (32,767 windows for the paper CNN: 32-bit
	// element counts) and runs larger asks in chunks of that
	// (Engine.MaxBatch says which).
	MaxBatch int
	// Device is the GPU's ordinal.
	Device int
	// LibDirs lists folders searched first for the CUDA libraries
	// (cuda.SearchDirs).
	LibDirs string
	// Precision is the GEMMs' arithmetic asked for ("" is FP32).
	Precision Precision
	// NoGraphs launches every operation at each call instead of one CUDA
	// graph per batch size (slower; for checks).
	NoGraphs bool
}

// probeWindows is the number of windows of the TF32 parity check.
const probeWindows = 64

// cublasWork is the workspace given to cuBLAS (it then allocates nothing
// while a graph is captured).
const cublasWork = 32 << 20

// Engine runs the forward pass on one GPU. It implements rgc.Predictor,
// rgc.Progressive and engine.Backend; it is not safe for concurrent use.
// It does not implement rgc.Expecter: it has no helper threads to keep
// polling, only the device's thread, which waits for each call on a
// channel (its wake-up is inside the batch-1 latency the device check
// measures).
type Engine struct {
	cfg      model.Config
	rowOf    map[int]int
	maxBatch int
	net      *net
	buckets  []int
	arith    Precision
	parity   engine.Parity // TF32 against FP32 at load, when asked for
	noGraphs bool

	dev    *cuda.Device
	blas   *cuda.BLAS
	stream cuda.Stream
	mod    cuda.Module
	funcs  map[string]cuda.Func
	base   [numArenas]cuda.Ptr
	work   cuda.Ptr
	host   []float32 // pinned: inputs and rows of MaxBatch windows
	out    []float32 // pinned: head outputs of MaxBatch windows
	plans  [][]launch
	graphs []*cuda.Graph

	cur   int // bucket index of the call in progress
	runFn func() error
	// compute computes the current call's bucket from host into out: on
	// the device's thread (run), or emulated on the CPU in tests.
	compute func() error
	closed  bool
}

// launch is an operation ready to queue: its kernel and arguments.
type launch struct {
	op   *Op
	fn   cuda.Func
	args *cuda.Args
}

var (
	_ engine.Backend    = (*Engine)(nil)
	_ engine.ArithNamer = (*Engine)(nil)
	_ rgc.Progressive   = (*Engine)(nil)
)

// New returns a GPU engine for a checkpoint.
func New(ck *model.Checkpoint, o Options) (*Engine, error) {
	if ck == nil {
		return nil, errors.New("gpu: nil checkpoint")
	}
	if err := ck.Validate(); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	return NewFromWeights(ck.Weights, ck.CellIDs, o)
}

// NewFromWeights returns a GPU engine for weights whose embedding row i
// belongs to the cell with cluster id cellIDs[i]. The weights are
// prepared by the CPU engine (its validation, batch-norm folding and
// layouts) and uploaded once.
func NewFromWeights(w *model.Weights, cellIDs []int, o Options) (*Engine, error) {
	if o.MaxBatch < 1 {
		return nil, fmt.Errorf("gpu: maxBatch %d must be >= 1", o.MaxBatch)
	}
	if o.Precision == "" {
		o.Precision = FP32
	}
	if _, err := ParsePrecision(string(o.Precision)); err != nil {
		return nil, err
	}
	cpu, err := engine.NewFromWeights(w, cellIDs, 1, 1)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	prep := cpu.Prepared()
	probe := cpu.ProbeWindows(probeWindows, 1)
	_ = cpu.Close()
	if err := checkHeadDim(prep.Config.HeadDim); err != nil {
		return nil, fmt.Errorf("%w (model %s)", err, prep.Config.Name())
	}
	maxBatch := min(o.MaxBatch, batchLimit(prep))
	nv, err := cuda.LoadNVRTC(o.LibDirs)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	dev, err := cuda.Open(o.Device, o.LibDirs)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	e := &Engine{cfg: prep.Config, rowOf: rowsOf(cellIDs), maxBatch: maxBatch, net: newNet(prep, maxBatch),
		buckets: buckets(maxBatch), arith: FP32, noGraphs: o.NoGraphs, dev: dev, funcs: map[string]cuda.Func{}}
	e.runFn = e.run
	e.compute = func() error { return e.dev.Do(e.runFn) }
	if err := dev.Do(func() error { return e.setup(nv, o.LibDirs) }); err != nil {
		e.Close()
		return nil, err
	}
	if o.Precision == TF32 {
		if err := e.tryTF32(probe); err != nil {
			e.Close()
			return nil, err
		}
	}
	if !o.NoGraphs {
		if err := dev.Do(e.capture); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// setup compiles the kernels for the device, uploads the weights and
// prepares every bucket's launches (on the device's thread). It ends by
// synchronising the context: the zeroing and the weights' upload go
// through the legacy stream, which the engine's non-blocking stream does
// not wait for.
func (e *Engine) setup(nv *cuda.NVRTC, libDirs string) error {
	d, n := e.dev, e.net
	cubin, err := cubinFor(nv, d.Arch(), e.cfg.HeadDim)
	if err != nil {
		return fmt.Errorf("%w (device %s, %s)", err, d.Name, d.Arch())
	}
	if e.mod, err = d.LoadModule(cubin); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	for _, k := range kernelNames() {
		if e.funcs[k], err = d.Function(e.mod, k); err != nil {
			return fmt.Errorf("gpu: %w", err)
		}
	}
	if e.base[arenaWeights], err = d.Alloc(4 * len(n.w.data)); err != nil {
		return fmt.Errorf("gpu: weights: %w", err)
	}
	if err := d.CopyIn(e.base[arenaWeights], unsafe.Pointer(&n.w.data[0]), 4*len(n.w.data)); err != nil {
		return fmt.Errorf("gpu: upload weights: %w", err)
	}
	if e.base[arenaActs], err = d.Alloc(4 * n.lay.total); err != nil {
		return fmt.Errorf("gpu: activations of %d windows: %w", e.maxBatch, err)
	}
	if err := d.Memset(e.base[arenaActs], 4*n.lay.total); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if e.work, err = d.Alloc(cublasWork); err != nil {
		return fmt.Errorf("gpu: cuBLAS workspace: %w", err)
	}
	if e.stream, err = d.NewStream(); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if e.blas, err = d.NewBLAS(libDirs, e.stream, e.work, cublasWork); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if e.host, err = d.HostAlloc(n.hostLen()); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	clear(e.host) // the rows of a bucket's unused windows must be valid
	if e.out, err = d.HostAlloc(e.maxBatch * n.headOut); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	for _, nb := range e.buckets {
		ls, err := e.prepare(n.plan(nb))
		if err != nil {
			return fmt.Errorf("%w (batch %d)", err, nb)
		}
		e.plans = append(e.plans, ls)
	}
	if err := d.SyncContext(); err != nil {
		return fmt.Errorf("gpu: set-up: %w", err)
	}
	return nil
}

// prepare checks ops' launches against CUDA's limits and resolves their
// regions to device addresses.
func (e *Engine) prepare(ops []Op) ([]launch, error) {
	ls := make([]launch, len(ops))
	for i := range ops {
		op := &ops[i]
		if err := op.checkLaunch(); err != nil {
			return nil, err
		}
		ls[i].op = op
		if op.Gemm != nil {
			continue
		}
		ls[i].fn = e.funcs[op.Kernel]
		a := cuda.NewArgs(len(op.Args))
		for j, arg := range op.Args {
			switch {
			case arg.Ref != nil:
				a.SetPtr(j, e.addr(*arg.Ref))
			case arg.Null:
				a.SetPtr(j, 0)
			default:
				a.SetInt(j, arg.Int)
			}
		}
		ls[i].args = a
	}
	return ls, nil
}

// addr is the device address of region r.
func (e *Engine) addr(r Ref) cuda.Ptr { return e.base[r.Arena].Add(4 * r.Off) }

// queue queues launch l on the stream.
func (e *Engine) queue(l *launch) error {
	op := l.op
	if g := op.Gemm; g != nil {
		if err := e.blas.Gemm(g.M, g.N, g.K, e.addr(g.A), g.Lda, e.addr(g.W), g.Ldw, e.addr(g.C), g.Ldc, false); err != nil {
			return fmt.Errorf("gpu: %s: %w", op.Layer, err)
		}
		return nil
	}
	if err := e.dev.Launch(l.fn, op.Grid, op.Block, op.Shared, e.stream, l.args); err != nil {
		return fmt.Errorf("gpu: %s (%s): %w", op.Layer, op.Kernel, err)
	}
	return nil
}

// record queues bucket k's whole call: the inputs' copy, every operation
// and the outputs' copy.
func (e *Engine) record(k int) error {
	n, nb := e.net, e.buckets[k]
	d := e.dev
	if err := d.CopyInAsync(e.addr(n.in.ref(nb)), unsafe.Pointer(&e.host[n.in.off]), 4*nb*rgc.WindowLen, e.stream); err != nil {
		return fmt.Errorf("gpu: inputs: %w", err)
	}
	if err := d.CopyInAsync(e.addr(n.rows.ref(nb)), unsafe.Pointer(&e.host[n.rows.off]), 4*nb, e.stream); err != nil {
		return fmt.Errorf("gpu: rows: %w", err)
	}
	for i := range e.plans[k] {
		if err := e.queue(&e.plans[k][i]); err != nil {
			return err
		}
	}
	if err := d.CopyOutAsync(unsafe.Pointer(&e.out[0]), e.addr(n.logits.ref(nb)), 4*nb*n.headOut, e.stream); err != nil {
		return fmt.Errorf("gpu: outputs: %w", err)
	}
	return nil
}

// capture records one CUDA graph per bucket (on the device's thread),
// each after one uncaptured run of the bucket (warmThenCapture).
func (e *Engine) capture() error {
	for _, g := range e.graphs {
		if err := e.dev.DestroyGraph(g); err != nil {
			return fmt.Errorf("gpu: %w", err)
		}
	}
	e.graphs = e.graphs[:0]
	return warmThenCapture(e.buckets,
		func(k int) error {
			if err := e.record(k); err != nil {
				return err
			}
			return e.dev.Sync(e.stream)
		},
		func(k int) error {
			g, err := e.dev.Capture(e.stream, func() error { return e.record(k) })
			if err != nil {
				return err
			}
			e.graphs = append(e.graphs, g)
			return nil
		})
}

// warmThenCapture runs bucket k (run) and then captures it (capture), for
// every bucket (of batch sizes[k]) in turn. cuBLAS chooses its kernels per
// GEMM size at a size's first call and, with lazy module loading (CUDA
// 12.2's default), loads them then; drivers before 12.3 cannot load a
// module inside a stream capture, so every size is first run outside one.
func warmThenCapture(sizes []int, run, capture func(k int) error) error {
	for k, nb := range sizes {
		if err := run(k); err != nil {
			return fmt.Errorf("gpu: warm-up of batch %d: %w", nb, err)
		}
		if err := capture(k); err != nil {
			return fmt.Errorf("gpu: capture of batch %d: %w", nb, err)
		}
	}
	return nil
}

// run computes the current call's bucket (on the device's thread).
func (e *Engine) run() error {
	if len(e.graphs) > 0 {
		if err := e.dev.LaunchGraph(e.graphs[e.cur], e.stream); err != nil {
			return fmt.Errorf("gpu: batch %d: %w", e.buckets[e.cur], err)
		}
	} else if err := e.record(e.cur); err != nil {
		return err
	}
	if err := e.dev.Sync(e.stream); err != nil {
		return fmt.Errorf("gpu: batch %d: %w", e.buckets[e.cur], err)
	}
	return nil
}

// DeviceTime returns the mean time of one pass of nb windows (1..MaxBatch)
// on the device over calls passes queued back to back, with one wait at
// the end: the bucket's graph (input copy from pinned memory, every
// operation, output copy) without the host's staging, its wait for each
// call or the probabilities. The inputs are those of the last call.
func (e *Engine) DeviceTime(nb, calls int) (time.Duration, error) {
	if nb < 1 || nb > e.maxBatch || calls < 1 {
		return 0, fmt.Errorf("gpu: device time of %d passes of %d windows (1..%d)", calls, nb, e.maxBatch)
	}
	k := bucketIndex(e.buckets, nb)
	var took time.Duration
	err := e.dev.Do(func() error {
		t0 := time.Now()
		for range calls {
			if len(e.graphs) > 0 {
				if err := e.dev.LaunchGraph(e.graphs[k], e.stream); err != nil {
					return err
				}
			} else if err := e.record(k); err != nil {
				return err
			}
		}
		if err := e.dev.Sync(e.stream); err != nil {
			return err
		}
		took = time.Since(t0) / time.Duration(calls)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("gpu: batch %d: %w", nb, err)
	}
	return took, nil
}

// tryTF32 switches the GEMMs to TF32 if probe's probabilities pass
// engine.Parity's check against FP32.
func (e *Engine) tryTF32(probe *rgc.Batch) error {
	p32 := make([]float32, probe.Len()*rgc.NumClasses)
	pt := make([]float32, len(p32))
	if err := e.Predict(probe, p32); err != nil {
		return err
	}
	if err := e.dev.Do(func() error { return e.blas.SetMath(cuda.MathTF32) }); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if err := e.Predict(probe, pt); err != nil {
		return err
	}
	var par engine.Parity
	for i := 0; i < probe.Len(); i++ {
		par.Add(p32[i*rgc.NumClasses:(i+1)*rgc.NumClasses], pt[i*rgc.NumClasses:(i+1)*rgc.NumClasses])
	}
	e.parity = par
	if par.OK() {
		e.arith = TF32
		return nil
	}
	if err := e.dev.Do(func() error { return e.blas.SetMath(cuda.MathFP32) }); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	return nil
}

// Precision returns the GEMMs' arithmetic in effect and, when TF32 was
// asked for, its parity check against FP32.
func (e *Engine) Precision() (Precision, engine.Parity) { return e.arith, e.parity }

// Arithmetic names the arithmetic in force, "cuda fp32" or "cuda tf32"
// (engine.ArithNamer): the flight recorder stores it as the session's
// precision.
func (e *Engine) Arithmetic() string { return "cuda " + string(e.arith) }

// Device describes the GPU: name, architecture, multiprocessors and driver.
func (e *Engine) Device() string {
	d := e.dev
	return fmt.Sprintf("%s (%s, %d SMs, driver %d.%d)", d.Name, d.Arch(), d.SMs, d.DriverVersion/1000, d.DriverVersion%1000/10)
}

// Config returns the model configuration.
func (e *Engine) Config() model.Config { return e.cfg }

// MaxBatch returns the largest batch of one pass.
func (e *Engine) MaxBatch() int { return e.maxBatch }

// Predict implements rgc.Predictor.
func (e *Engine) Predict(b *rgc.Batch, out []float32) error { return e.do(b, out, true, nil) }

// PredictEach implements rgc.Progressive: it is Predict, and it calls
// done(n) on the calling goroutine as each chunk of MaxBatch windows
// (the whole batch when it fits) has its probabilities in out. A chunk's
// windows complete together on the device, so there is nothing to hand
// over sooner; the daemon's handing-over path runs as with the CPU
// engine. The outputs are Predict's, bit for bit.
func (e *Engine) PredictEach(b *rgc.Batch, out []float32, done func(n int)) error {
	return e.do(b, out, true, done)
}

// Logits writes the raw head outputs (Config.HeadOut per window) to out.
func (e *Engine) Logits(b *rgc.Batch, out []float32) error { return e.do(b, out, false, nil) }

// do computes b in chunks of MaxBatch windows, writing probabilities
// (probs) or head outputs to out and telling done (if not nil) of each
// chunk's end.
func (e *Engine) do(b *rgc.Batch, out []float32, probs bool, done func(n int)) error {
	if e.closed {
		return errors.New("gpu: closed")
	}
	if err := b.Check(); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	ho := e.net.headOut
	outW := ho
	if probs {
		outW = e.cfg.Classes
	}
	n := b.Len()
	if len(out) < n*outW {
		return fmt.Errorf("gpu: output of %d floats for %d windows x %d", len(out), n, outW)
	}
	for lo := 0; lo < n; lo += e.maxBatch {
		hi := min(lo+e.maxBatch, n)
		if err := e.net.stage(e.host, b, lo, hi, e.rowOf); err != nil {
			return err
		}
		e.cur = bucketIndex(e.buckets, hi-lo)
		if err := e.compute(); err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			logits := e.out[(i-lo)*ho : (i-lo+1)*ho]
			if probs {
				e.cfg.Probs(logits, out[i*outW:(i+1)*outW])
			} else {
				copy(out[i*outW:(i+1)*outW], logits)
			}
		}
		if done != nil {
			done(hi)
		}
	}
	return nil
}

// bucketIndex is the index of bucketFor(bs, n).
func bucketIndex(bs []int, n int) int {
	for i, b := range bs {
		if b >= n {
			return i
		}
	}
	return len(bs) - 1
}

// Close frees the engine's device memory, graphs and module and closes the
// device. The engine must not be used afterwards.
func (e *Engine) Close() error {
	if e.closed || e.dev == nil {
		return nil
	}
	e.closed = true
	d := e.dev
	err := d.Do(func() error {
		var errs []error
		_ = d.Sync(e.stream)
		for _, g := range e.graphs {
			errs = append(errs, d.DestroyGraph(g))
		}
		if e.blas != nil {
			errs = append(errs, e.blas.Close())
		}
		for _, p := range append(e.base[:], e.work) {
			if p != 0 {
				errs = append(errs, d.Free(p))
			}
		}
		errs = append(errs, d.HostFree(e.host), d.HostFree(e.out))
		if e.stream != 0 {
			errs = append(errs, d.DestroyStream(e.stream))
		}
		if e.mod != 0 {
			errs = append(errs, d.UnloadModule(e.mod))
		}
		return errors.Join(errs...)
	})
	return errors.Join(err, d.Close())
}
