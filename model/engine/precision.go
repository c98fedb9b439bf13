package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"rgcpred/internal/sgemm"
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
)

// ParsePrecision parses "fp32" or "bf16".
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(s); p {
	case FP32, BF16:
		return p, nil
	}
	return "", fmt.Errorf("engine: unknown precision %q (want %q or %q)", s, FP32, BF16)
}

// BF16MaxProbDiff is the parity check's tolerance: the largest difference
// between the bf16 and float32 paths of any class probability, and of any
// value of the cumulative distribution, on a probe window. On real windows
// of data/chicken-17-08-21 the largest differences seen are about a third
// of it (docs/engine.md, "bf16 path").
//
// No tolerance makes the median class identical on every window: where the
// float32 cumulative distribution passes within d of 0.5 at a class
// boundary, a change of d moves the median to the neighbouring class. The
// check therefore requires the median to be identical on every window
// whose median is decided by more than the tolerance (which a cumulative
// difference within the tolerance guarantees), and counts the others.
const BF16MaxProbDiff = 0.01

// bf16Tol is the tolerance Parity.OK applies (tests lower it to force a
// failed check).
var bf16Tol = BF16MaxProbDiff

// Parity is the outcome of comparing the bf16 path with float32 on probe
// windows.
type Parity struct {
	// Windows is the number of probe windows compared.
	Windows int
	// MedianMismatches counts windows whose median class differs.
	MedianMismatches int
	// Close counts windows whose float32 median is within BF16MaxProbDiff
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
// the cumulative distribution moves by more than BF16MaxProbDiff, and no
// median class differs where the float32 median is decided by more than
// that.
func (p Parity) OK() bool {
	return p.Windows > 0 && p.DecidedMismatches == 0 && p.MaxProbDiff <= bf16Tol && p.MaxCDFDiff <= bf16Tol
}

// String describes the comparison in one line.
func (p Parity) String() string {
	return fmt.Sprintf("%d windows: median mismatches %d (%d where decided; %d windows within %g of a flip), max |dp| %.2g, max |dCDF| %.2g",
		p.Windows, p.MedianMismatches, p.DecidedMismatches, p.Close, bf16Tol, p.MaxProbDiff, p.MaxCDFDiff)
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
	close := below > 0.5-bf16Tol || below+float64(p32[m]) < 0.5+bf16Tol
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

// Force makes the engine run in p on any CPU, without a parity check: BF16
// natively where the CPU has AVX512_BF16, else on sgemm's portable bf16
// kernels, which give the same bits more slowly than float32. It is for
// re-running what a daemon computed in p (an audit of a recorded session,
// an offline evaluation on another machine), not for serving.
func (e *Engine) Force(p Precision) error {
	switch p {
	case FP32, BF16:
		e.net.setBF16(p == BF16)
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

// Precision returns the arithmetic the engine runs: BF16 only after a
// successful SetPrecision(BF16, ...) or Force(BF16).
func (e *Engine) Precision() Precision {
	if e.net.conv1.w16 != nil {
		return BF16
	}
	return FP32
}

// SetPrecision selects the arithmetic of the engine's GEMMs and returns the
// precision in effect. FP32 always succeeds. BF16 takes effect only where
// the CPU runs sgemm's bf16 kernels natively (AVX512_BF16; the portable
// kernels are slower than float32) and the bf16 path agrees with float32 on
// the probe windows (see Parity.OK); otherwise the engine stays on (or
// returns to) float32 and the returned Parity says why. probe nil uses
// built-in synthetic windows (random light flashes and spikes); a serving
// daemon should pass real windows of its recording. Call it before
// serving: like Predict, it is not safe for concurrent use.
func (e *Engine) SetPrecision(p Precision, probe *rgc.Batch) (Precision, Parity, error) {
	switch p {
	case FP32:
		e.net.setBF16(false)
		return FP32, Parity{}, nil
	case BF16:
	default:
		return e.Precision(), Parity{}, fmt.Errorf("engine: unknown precision %q", p)
	}
	if !sgemm.BF16Native() {
		e.net.setBF16(false)
		return FP32, Parity{}, nil
	}
	if probe == nil {
		probe = e.probeWindows(16, 1)
	}
	par, err := e.CompareBF16(probe)
	if err != nil {
		e.net.setBF16(false)
		return FP32, par, err
	}
	if !par.OK() {
		e.net.setBF16(false)
		return FP32, par, nil
	}
	e.net.setBF16(true)
	return BF16, par, nil
}

// CompareBF16 runs the windows of b on the float32 and the bf16 paths and
// compares the class probabilities. It leaves the engine on float32. It
// runs on the calling thread alone (the outputs do not depend on the
// threads), so that a caller at low priority (a daemon's reload) keeps
// all of it there.
func (e *Engine) CompareBF16(b *rgc.Batch) (Parity, error) {
	n := b.Len()
	if n == 0 {
		return Parity{}, fmt.Errorf("engine: parity check needs probe windows")
	}
	e.solo = true
	defer func() { e.solo = false }()
	out32, out16 := make([]float32, n*rgc.NumClasses), make([]float32, n*rgc.NumClasses)
	e.net.setBF16(false)
	if err := e.Predict(b, out32); err != nil {
		return Parity{}, fmt.Errorf("engine: parity check, float32: %w", err)
	}
	e.net.setBF16(true)
	err := e.Predict(b, out16)
	e.net.setBF16(false)
	if err != nil {
		return Parity{}, fmt.Errorf("engine: parity check, bf16: %w", err)
	}
	var par Parity
	for i := 0; i < n; i++ {
		par.compare(out32[i*rgc.NumClasses:(i+1)*rgc.NumClasses], out16[i*rgc.NumClasses:(i+1)*rgc.NumClasses])
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

// setBF16 switches every convolution and linear layer run as a GEMM to the
// bf16 path or back. Their bf16 weights are rounded once, on the first
// switch, and kept (n.w16) beside the float32 ones. The squeeze-excite
// layers are matrix-vector products and stay float32.
func (n *network) setBF16(on bool) {
	var ws []**sgemm.PackedBF16
	var fs []*sgemm.PackedB
	addConv := func(c *conv) { ws, fs = append(ws, &c.w16), append(fs, c.w) }
	addLin := func(l *linear) { ws, fs = append(ws, &l.w16), append(fs, l.w) }
	addConv(&n.conv1)
	addConv(&n.conv2)
	for i := range n.blocks {
		b := &n.blocks[i]
		addConv(&b.conv1)
		addConv(&b.conv2)
		addConv(&b.conv3)
		if b.shortcut != nil {
			addConv(b.shortcut)
		}
	}
	if n.proj != nil {
		addLin(n.proj)
	}
	for i := range n.layers {
		l := &n.layers[i]
		addLin(&l.qkv)
		addLin(&l.proj)
		addLin(&l.fc)
		addLin(&l.mproj)
	}
	addLin(&n.head)
	if on && n.w16 == nil {
		n.w16 = make([]*sgemm.PackedBF16, len(fs))
		for i, f := range fs {
			n.w16[i] = sgemm.NewPackedBF16From(f)
		}
	}
	for i, w := range ws {
		*w = nil
		if on {
			*w = n.w16[i]
		}
	}
}
