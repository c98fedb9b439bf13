package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"rgcpred/base/sgemm"
	"rgcpred/model"
	"rgcpred/rgc"
)

// Precision names the arithmetic of the engine's convolutions and linear
// layers (attention scores, normalisation and the softmax stay float32).
type Precision string

const (
	// FP32 is float32 throughout: the default.
	FP32 Precision = "fp32"
	// BF16 rounds the inputs of the convolutions and linear layers to
	// bfloat16 and accumulates in float32 (sgemm.GemmPackedBiasBF16), on
	// CPUs with the AVX512_BF16 instructions.
	BF16 Precision = "bf16"
	// INT8 is BF16 with the widest layers in 8-bit integers
	// (sgemm.GemmPackedBiasI8: inputs quantized to uint8 per call,
	// weights to int8 per output channel, products summed exactly in
	// int32), on CPUs with AVX512_VNNI and AVX512_BF16:
	//   - the transformer's linear layers (q, k, v, the projections, the
	//     MLP; not the head), each input row with a scale and zero point
	//     of its own (sgemm.QuantizeRowsU8);
	//   - in CNN blocks with at least int8MinMid bottleneck channels (the
	//     paper CNN's), the convolutions on ReLU outputs: after the first
	//     block, 1x1 inputs with a scale per row and the k7 input, whose
	//     rows overlap, with one scale per window; in block 0, whose rows
	//     carry over from a cell's previous window (reuse.go), a scale per
	//     row throughout, the k7 convolution summed tap by tap, so that a
	//     row depends only on the positions it reads.
	// The stem and the narrower blocks (the cpu preset's), for which the
	// quantization passes cost more than int8 saves, stay bf16.
	INT8 Precision = "int8"
)

// ParsePrecision parses "fp32", "bf16" or "int8".
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case FP32, BF16, INT8:
		return p, nil
	}
	return "", fmt.Errorf("engine: unknown precision %q (want %q, %q or %q)", s, FP32, BF16, INT8)
}

// Native reports whether this CPU (and build) runs p on its own
// instructions: FP32 always, BF16 with AVX512_BF16, INT8 with AVX512_BF16
// and AVX512_VNNI. Elsewhere Force still runs p, on portable kernels that
// give the same bits more slowly than float32.
func Native(p Precision) bool {
	switch p {
	case FP32:
		return true
	case BF16:
		return sgemm.BF16Native()
	case INT8:
		return sgemm.BF16Native() && sgemm.I8Native()
	}
	return false
}

// MaxProbDiff is the parity check's tolerance: the largest difference
// between the bf16 and float32 paths of any class probability, and of any
// value of the cumulative distribution, on a probe window. On real windows
// of data/chicken-17-08-21 the largest differences seen are about a third
// of it (docs/engine.md, "bf16 path").
//   - The median class must be identical on every window whose median is
//     decided by more than the tolerance (which a cumulative difference
//     within it guarantees); the others are counted.
//   - Why not every window: where the float32 cumulative distribution passes
//     within d of 0.5 at a class boundary, a change of d moves the median
//     to the neighbouring class, so no tolerance can promise it.
const MaxProbDiff = 0.01

// parityTol is the tolerance Parity.OK applies (tests lower it to force a
// failed check).
var parityTol = MaxProbDiff

// Parity is the outcome of comparing the bf16 path with float32 on probe
// windows.
type Parity struct {
	// Windows is the number of probe windows compared.
	Windows int
	// MedianMismatches counts windows whose median class differs.
	MedianMismatches int
	// Close counts windows whose float32 median is within MaxProbDiff
	// of the neighbouring class (the cumulative distribution within it of
	// 0.5 at a boundary of the median class).
	Close int
	// DecidedMismatches counts median mismatches on the other windows.
	DecidedMismatches int
	// MaxProbDiff is the largest |p_bf16 - p_fp32| over every window and
	// class, MaxCDFDiff the largest difference of the cumulative
	// distributions.
	MaxProbDiff, MaxCDFDiff float64
}

// OK reports whether the bf16 path passes: no probability and no value of
// the cumulative distribution moves by more than MaxProbDiff, and no
// median class differs where the float32 median is decided by more than
// that.
func (p Parity) OK() bool {
	return p.Windows > 0 && p.DecidedMismatches == 0 && p.MaxProbDiff <= parityTol && p.MaxCDFDiff <= parityTol
}

// String describes the comparison in one line.
func (p Parity) String() string {
	return fmt.Sprintf("%d windows: median mismatches %d (%d where decided; %d windows within %g of a flip), max |dp| %.2g, max |dCDF| %.2g",
		p.Windows, p.MedianMismatches, p.DecidedMismatches, p.Close, parityTol, p.MaxProbDiff, p.MaxCDFDiff)
}

// compare adds one window's comparison to p.
func (p *Parity) compare(p32, p16 []float32) {
	p.Windows++
	worst := func(cur, d float64) float64 {
		if d != d {
			return math.Inf(1) // NaN counts as the worst
		}
		return max(cur, d)
	}
	var c32, c16 float64
	for k := range p32 {
		p.MaxProbDiff = worst(p.MaxProbDiff, math.Abs(float64(p16[k])-float64(p32[k])))
		c32 += float64(p32[k])
		c16 += float64(p16[k])
		p.MaxCDFDiff = worst(p.MaxCDFDiff, math.Abs(c16-c32))
	}
	m := model.Median(p32)
	var below float64 // float32 cumulative probability below the median class
	for _, v := range p32[:m] {
		below += float64(v)
	}
	close := below > 0.5-parityTol || below+float64(p32[m]) < 0.5+parityTol
	if close {
		p.Close++
	}
	if model.Median(p16) != m {
		p.MedianMismatches++
		if !close {
			p.DecidedMismatches++
		}
	}
}

// portable is set by UsePortable.
var portable atomic.Bool

// UsePortable runs the bf16 and int8 paths on sgemm's portable kernels (on)
// and lets SetPrecision select them on any CPU, after the same parity
// check; off restores the CPU's own kernels and Native's rule. The portable
// kernels give the native ones' bits, more slowly than float32: this is for
// tests and CI's portable lane, which run the int8 -> bf16 -> fp32 ladder
// and the parity checks whatever the CPU, never for serving. Call it only
// while no engine computes.
func UsePortable(on bool) {
	sgemm.UsePortable(on)
	portable.Store(on)
}

// Force makes the engine run in p on any CPU, without a parity check:
// natively where Native(p), else on sgemm's portable kernels, which give
// the same bits more slowly than float32. It is for re-running what a
// daemon computed in p (an audit of a recorded session, an offline
// evaluation on another machine), not for serving.
func (e *Engine) Force(p Precision) error {
	switch p {
	case FP32, BF16, INT8:
		e.net.setArith(p)
		return nil
	}
	return fmt.Errorf("engine: unknown precision %q", p)
}

// PrecisionOf returns the arithmetic of a predictor: its Precision() for an
// Engine (or any predictor that says), FP32 for others.
func PrecisionOf(p rgc.Predictor) Precision {
	if e, ok := p.(interface{ Precision() Precision }); ok {
		return e.Precision()
	}
	return FP32
}

// ArithNamer is a predictor that names the arithmetic it serves in itself
// (model/gpu's Engine: "cuda fp32" or "cuda tf32").
type ArithNamer interface {
	Arithmetic() string
}

// ArithmeticOf names the arithmetic a predictor serves in, as the flight
// recorder stores it: its Arithmetic() where it is an ArithNamer, else
// PrecisionOf's ("fp32", "bf16" or "int8").
func ArithmeticOf(p rgc.Predictor) string {
	if a, ok := p.(ArithNamer); ok {
		return a.Arithmetic()
	}
	return string(PrecisionOf(p))
}

// Precision returns the arithmetic the engine runs: BF16 or INT8 only
// after a SetPrecision or Force that selected it.
func (e *Engine) Precision() Precision {
	return e.net.arith
}

// SetPrecision selects the arithmetic of the engine and returns the
// precision in effect with the parity check of the precision asked for
// (zero where none ran). Call it before serving: like Predict, it is not
// safe for concurrent use.
//   - FP32 always succeeds.
//   - BF16 and INT8 take effect only where Native (the portable kernels are
//     slower than float32; UsePortable lifts this for tests) and the path
//     agrees with float32 on the probe windows (Parity.OK).
//   - INT8 that cannot falls back to BF16 on the same terms; what cannot run
//     either stays on (or returns to) float32.
//   - probe nil uses built-in synthetic windows (random light flashes and
//     spikes); a serving daemon should pass real windows of its recording.
func (e *Engine) SetPrecision(p Precision, probe *rgc.Batch) (Precision, Parity, error) {
	switch p {
	case FP32:
		e.net.setArith(FP32)
		return FP32, Parity{}, nil
	case BF16, INT8:
	default:
		return e.Precision(), Parity{}, fmt.Errorf("engine: unknown precision %q", p)
	}
	fallback := func(par Parity) (Precision, Parity, error) {
		if p == INT8 {
			got, _, err := e.SetPrecision(BF16, probe)
			return got, par, err
		}
		e.net.setArith(FP32)
		return FP32, par, nil
	}
	if !Native(p) && !portable.Load() {
		return fallback(Parity{})
	}
	if probe == nil {
		probe = e.probeWindows(16, 1)
	}
	par, err := e.Compare(p, probe)
	if err != nil {
		e.net.setArith(FP32)
		return FP32, par, err
	}
	if !par.OK() {
		return fallback(par)
	}
	e.net.setArith(p)
	return e.Precision(), par, nil
}

// Compare runs the windows of b on the float32 path and on p's and
// compares the class probabilities. It leaves the engine on float32. It
// runs on the calling thread alone (the outputs do not depend on the
// threads), so that a caller at low priority (a daemon's reload) keeps
// all of it there.
func (e *Engine) Compare(p Precision, b *rgc.Batch) (Parity, error) {
	n := b.Len()
	if n == 0 {
		return Parity{}, fmt.Errorf("engine: parity check needs probe windows")
	}
	e.solo = true
	defer func() { e.solo = false }()
	out32, outP := make([]float32, n*rgc.NumClasses), make([]float32, n*rgc.NumClasses)
	e.net.setArith(FP32)
	if err := e.Predict(b, out32); err != nil {
		return Parity{}, fmt.Errorf("engine: parity check, float32: %w", err)
	}
	e.net.setArith(p)
	err := e.Predict(b, outP)
	e.net.setArith(FP32)
	if err != nil {
		return Parity{}, fmt.Errorf("engine: parity check, %s: %w", p, err)
	}
	var par Parity
	for i := 0; i < n; i++ {
		par.compare(out32[i*rgc.NumClasses:(i+1)*rgc.NumClasses], outP[i*rgc.NumClasses:(i+1)*rgc.NumClasses])
	}
	return par, nil
}

// probeWindows returns n synthetic windows, reproducible from seed: each
// stimulus row a sequence of flashes (levels uniform in [0, 1], each held
// for 8 to 200 bins), the spike row Bernoulli(0.03), cells taken in turn
// from the engine's cells.
func (e *Engine) probeWindows(n int, seed uint64) *rgc.Batch {
	ids := make([]int, 0, len(e.rowOf))
	for id := range e.rowOf {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rng := rand.New(rand.NewPCG(seed, 0x6266313670726f62))
	b := &rgc.Batch{Inputs: make([]float32, n*rgc.WindowLen), Cells: make([]int, n), Ends: make([]int, n)}
	for i := 0; i < n; i++ {
		win := b.Inputs[i*rgc.WindowLen : (i+1)*rgc.WindowLen]
		for r := 0; r*rgc.WindowBins < rgc.WindowLen; r++ {
			row := win[r*rgc.WindowBins : (r+1)*rgc.WindowBins]
			if r == rgc.SpikeRow {
				for t := range row {
					if rng.Float64() < 0.03 {
						row[t] = 1
					}
				}
				continue
			}
			for t := 0; t < len(row); {
				level, hold := float32(rng.Float64()), 8+rng.IntN(193)
				for end := min(len(row), t+hold); t < end; t++ {
					row[t] = level
				}
			}
		}
		b.Cells[i] = ids[i%len(ids)]
		b.Ends[i] = rgc.WindowBins - 1 + i
	}
	return b
}

// int8MinMid is the fewest bottleneck channels a block runs int8 with: on
// the paper CNN's blocks (128) int8 takes a window moved on from its cell's
// last from 0.54 to 0.38 ms on one thread (AMD EPYC, Zen 4; block 0 and the
// transformer still bf16); on the cpu preset's (32) the quantization passes
// and the extra phase cost more than the narrower GEMMs save (0.21 to 0.23
// ms; docs/results.md).
const int8MinMid = 64

// setArith switches the network to p: every convolution and linear layer
// run as a GEMM to the bf16 path (BF16 and INT8) or back, and for INT8 the
// layers the INT8 constant lists to the int8 path. The bf16 and int8
// weights are made once, on the first switch, and kept (n.w16, n.w8,
// n.taps, n.tap3) beside the float32 ones. The squeeze-excite layers are
// matrix-vector products and stay float32.
func (n *network) setArith(p Precision) {
	var ws []**sgemm.PackedBF16
	var fs []*sgemm.PackedB
	addConv := func(c *conv) { ws, fs = append(ws, &c.w16), append(fs, c.w) }
	addLin := func(l *linear) { ws, fs = append(ws, &l.w16), append(fs, l.w) }
	var w8 []*conv    // the int8 path's convolutions
	var tapped *block // block 0 under int8: conv2 tap by tap, conv3 int8
	addConv(&n.conv1)
	addConv(&n.conv2)
	for i := range n.blocks {
		b := &n.blocks[i]
		cs := b.convList()
		for _, c := range cs {
			addConv(c)
		}
		if i == 0 && b.mid >= int8MinMid {
			tapped = b
		}
		if i > 0 && b.mid >= int8MinMid {
			w8 = append(w8, cs...)
		}
	}
	var l8 []*linear // the int8 path's linear layers
	if n.proj != nil {
		addLin(n.proj)
		l8 = append(l8, n.proj)
	}
	for i := range n.layers {
		l := &n.layers[i]
		addLin(&l.qkv)
		addLin(&l.proj)
		addLin(&l.fc)
		addLin(&l.mproj)
		l8 = append(l8, &l.qkv, &l.proj, &l.fc, &l.mproj)
	}
	addLin(&n.head)
	bf16, int8 := p == BF16 || p == INT8, p == INT8
	if bf16 && n.w16 == nil {
		n.w16 = make([]*sgemm.PackedBF16, len(fs))
		for i, f := range fs {
			n.w16[i] = sgemm.NewPackedBF16From(f)
		}
	}
	if int8 && n.w8 == nil {
		n.w8 = make([]*sgemm.PackedI8, len(w8)+len(l8))
		for i, c := range w8 {
			n.w8[i] = sgemm.NewPackedI8From(c.w)
		}
		for i, l := range l8 {
			n.w8[len(w8)+i] = sgemm.NewPackedI8From(l.w)
		}
	}
	for i, w := range ws {
		*w = nil
		if bf16 {
			*w = n.w16[i]
		}
	}
	for i, c := range w8 {
		c.w8 = nil
		if int8 {
			c.w8 = n.w8[i]
		}
	}
	for i, l := range l8 {
		l.w8 = nil
		if int8 {
			l.w8 = n.w8[len(w8)+i]
		}
	}
	if tapped != nil {
		if int8 && n.taps == nil {
			n.taps, n.tap3 = tapped.conv2.newTaps(), sgemm.NewPackedI8From(tapped.conv3.w)
		}
		tapped.conv2.taps, tapped.conv3.w8 = nil, nil
		if int8 {
			tapped.conv2.taps, tapped.conv3.w8 = n.taps, n.tap3
		}
	}
	n.arith = p
}
