package gpu

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// ParityTol is the fp32 goal of the device check: every operation's
// output within 1e-4 of the CPU's, relative to the larger of 1 and the
// value.
const ParityTol = 1e-4

// OpDiff is one operation's output on the GPU against the CPU emulation
// of the same plan.
type OpDiff struct {
	Op     int     `json:"op"`
	Layer  string  `json:"layer"`
	Kernel string  `json:"kernel"`
	MaxAbs float64 `json:"max_abs"` // largest |gpu - cpu|
	MaxRel float64 `json:"max_rel"` // largest |gpu - cpu| / max(1, |cpu|)
	At     int     `json:"at"`      // index of the largest relative difference in the op's output
}

// LayerReport is the layer-by-layer comparison of one configuration.
type LayerReport struct {
	Config    string   `json:"config"`
	Precision string   `json:"precision"`
	Windows   int      `json:"windows"`
	Ops       []OpDiff `json:"ops"`
	// FirstOver names the first operation whose output differs by more
	// than ParityTol ("" when none does), and by how much.
	FirstOver     string  `json:"first_over"`
	FirstOverDiff float64 `json:"first_over_diff"`
	// HeadVsEngine compares the GPU's head outputs with the CPU engine's
	// (MaxRel as above); ProbsVsEngine is engine.Parity of the GPU's
	// probabilities against the CPU engine's.
	HeadVsEngine  float64       `json:"head_vs_engine"`
	ProbsVsEngine engine.Parity `json:"probs_vs_engine"`
	OK            bool          `json:"ok"`
}

// LayerParity runs b (at most MaxBatch windows) operation by operation,
// without graphs, and compares each operation's output with the CPU
// emulation of the same plan (emulate.go), then the head outputs and
// probabilities with cpu, the CPU engine of the same weights.
func (e *Engine) LayerParity(b *rgc.Batch, cpu *engine.Engine) (*LayerReport, error) {
	nb := b.Len()
	if nb < 1 || nb > e.maxBatch {
		return nil, fmt.Errorf("gpu: layer parity of %d windows, want 1..%d", nb, e.maxBatch)
	}
	n := e.net
	ops := n.plan(nb)
	ls, err := e.prepare(ops)
	if err != nil {
		return nil, err
	}
	host := make([]float32, n.hostLen())
	if err := n.stage(host, b, 0, nb, e.rowOf); err != nil {
		return nil, err
	}
	if err := n.stage(e.host, b, 0, nb, e.rowOf); err != nil {
		return nil, err
	}
	rep := &LayerReport{Config: e.cfg.Name(), Precision: string(e.arith), Windows: nb}
	var dev []float32
	var gerr error
	inputs := func() error {
		d := e.dev
		if err := d.CopyIn(e.addr(n.in.ref(nb)), unsafe.Pointer(&e.host[n.in.off]), 4*nb*rgc.WindowLen); err != nil {
			return err
		}
		return d.CopyIn(e.addr(n.rows.ref(nb)), unsafe.Pointer(&e.host[n.rows.off]), 4*nb)
	}
	if err := e.dev.Do(inputs); err != nil {
		return nil, fmt.Errorf("gpu: inputs: %w", err)
	}
	n.emulatePlan(ops, host, func(i int, mem [numArenas][]float32) {
		if gerr != nil {
			return
		}
		op := &ops[i]
		if cap(dev) < op.Out.Len {
			dev = make([]float32, op.Out.Len)
		}
		dev = dev[:op.Out.Len]
		gerr = e.dev.Do(func() error {
			if err := e.queue(&ls[i]); err != nil {
				return err
			}
			if err := e.dev.Sync(e.stream); err != nil {
				return fmt.Errorf("gpu: %s (%s): %w", op.Layer, op.Kernel, err)
			}
			return e.dev.CopyOut(unsafe.Pointer(&dev[0]), e.addr(op.Out), 4*op.Out.Len)
		})
		if gerr != nil {
			return
		}
		want := mem[op.Out.Arena][op.Out.Off : op.Out.Off+op.Out.Len]
		d := OpDiff{Op: i, Layer: op.Layer, Kernel: op.Kernel}
		for j, w := range want {
			a := math.Abs(float64(dev[j]) - float64(w))
			r := a / math.Max(1, math.Abs(float64(w)))
			if a != a {
				a, r = math.Inf(1), math.Inf(1)
			}
			d.MaxAbs = max(d.MaxAbs, a)
			if r > d.MaxRel {
				d.MaxRel, d.At = r, j
			}
		}
		rep.Ops = append(rep.Ops, d)
		if rep.FirstOver == "" && d.MaxRel > ParityTol {
			rep.FirstOver = fmt.Sprintf("op %d, %s (%s)", i, op.Layer, op.Kernel)
			rep.FirstOverDiff = d.MaxRel
		}
	})
	if gerr != nil {
		return nil, gerr
	}
	// The head outputs and probabilities against the CPU engine.
	ho := n.headOut
	got, want := make([]float32, nb*ho), make([]float32, nb*ho)
	if err := e.Logits(b, got); err != nil {
		return nil, err
	}
	if err := cpu.Logits(b, want); err != nil {
		return nil, err
	}
	rep.HeadVsEngine = maxRelDiff(got, want)
	pg, pw := make([]float32, rgc.NumClasses), make([]float32, rgc.NumClasses)
	for i := 0; i < nb; i++ {
		e.cfg.Probs(got[i*ho:(i+1)*ho], pg)
		e.cfg.Probs(want[i*ho:(i+1)*ho], pw)
		rep.ProbsVsEngine.Add(pw, pg)
	}
	rep.OK = rep.FirstOver == "" && rep.HeadVsEngine <= ParityTol && rep.ProbsVsEngine.MedianMismatches == 0
	return rep, nil
}

// maxRelDiff is the largest |got - want| / max(1, |want|) (+Inf for NaN).
func maxRelDiff(got, want []float32) float64 {
	var d float64
	for i := range want {
		e := math.Abs(float64(got[i])-float64(want[i])) / math.Max(1, math.Abs(float64(want[i])))
		if e != e {
			return math.Inf(1)
		}
		d = max(d, e)
	}
	return d
}

// EmulationCost returns the CPU time per window of LayerParity's reference
// for weights w: the emulation of one plan of n windows (random inputs),
// divided by n. The device check sizes its parity windows to its budget
// with it; it needs no GPU.
func EmulationCost(w *model.Weights, cellIDs []int, n int) (time.Duration, error) {
	cpu, err := engine.NewFromWeights(w, cellIDs, n, 1)
	if err != nil {
		return 0, fmt.Errorf("gpu: %w", err)
	}
	defer cpu.Close()
	b := cpu.ProbeWindows(n, 1)
	net := newNet(cpu.Prepared(), n)
	host := make([]float32, net.hostLen())
	if err := net.stage(host, b, 0, n, rowsOf(cellIDs)); err != nil {
		return 0, err
	}
	t0 := time.Now()
	net.emulatePlan(net.plan(n), host, nil)
	return time.Since(t0) / time.Duration(n), nil
}
