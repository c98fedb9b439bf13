package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"rgcpred/base/cuda"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// emulatedEngine returns an Engine for config name with cpuEngine's
// weights whose calls run on the CPU: each bucket's plan emulated
// (emulatePlan) in place of the device, with Engine's own host loop
// (chunks, staging, probabilities, hand-over) around it.
func emulatedEngine(t *testing.T, name string, seed uint64, maxBatch int) (*Engine, *engine.Engine) {
	t.Helper()
	cpu := cpuEngine(t, name, seed)
	prep := cpu.Prepared()
	n := newNet(prep, maxBatch)
	e := &Engine{cfg: prep.Config, rowOf: rowsOf(testCells), maxBatch: maxBatch, net: n, buckets: buckets(maxBatch),
		arith: FP32, host: make([]float32, n.hostLen()), out: make([]float32, maxBatch*n.headOut)}
	e.compute = func() error {
		nb := e.buckets[e.cur]
		acts := n.emulatePlan(n.plan(nb), e.host, nil)
		copy(e.out, acts[n.logits.off:n.logits.off+nb*n.headOut])
		return nil
	}
	return e, cpu
}

// TestPredictEach runs PredictEach through the engine's host loop on the
// CPU emulation of its plans: done is told of each chunk of MaxBatch
// windows as it completes (growing, ending at the batch), the outputs are
// Predict's bit for bit and within ParityTol of the CPU engine's; a window
// of an unknown cell fails the call after the chunks before it were handed
// over, and bad input hands nothing over.
func TestPredictEach(t *testing.T) {
	g, cpu := emulatedEngine(t, "gpt-a-cat-cpu", 3, 2)
	for _, tc := range []struct {
		name    string
		n       int
		bad     int // window given an unknown cell (-1: none)
		short   bool
		handed  []int
		wantErr bool
	}{
		{"one chunk", 2, -1, false, []int{2}, false},
		{"one window", 1, -1, false, []int{1}, false},
		{"three chunks", 5, -1, false, []int{2, 4, 5}, false},
		{"unknown cell in the second chunk", 5, 3, false, []int{2}, true},
		{"unknown cell in the first chunk", 3, 0, false, nil, true},
		{"short output", 3, -1, true, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := cpu.ProbeWindows(tc.n, uint64(tc.n))
			want := make([]float32, tc.n*rgc.NumClasses)
			if err := cpu.Predict(b, want); err != nil {
				t.Fatal(err)
			}
			if tc.bad >= 0 {
				b.Cells[tc.bad] = 999
			}
			got := make([]float32, tc.n*rgc.NumClasses)
			out := got
			if tc.short {
				out = got[:len(got)-1]
			}
			var handed []int
			err := g.PredictEach(b, out, func(n int) {
				// What is handed over is final now.
				if d := maxRelDiff(got[:n*rgc.NumClasses], want[:n*rgc.NumClasses]); d > ParityTol {
					t.Errorf("windows 0..%d handed over differ from the CPU engine's by %.3g", n-1, d)
				}
				handed = append(handed, n)
			})
			if (err != nil) != tc.wantErr || !slices.Equal(handed, tc.handed) {
				t.Fatalf("PredictEach: error %v, handed over %v; want error %v, %v", err, handed, tc.wantErr, tc.handed)
			}
			if tc.wantErr {
				return
			}
			whole := make([]float32, len(got))
			if err := g.Predict(b, whole); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, whole) {
				t.Error("PredictEach's outputs differ from Predict's")
			}
		})
	}
}

// TestComputeErrorHandsNothing: a chunk whose computation fails is not
// handed over, and its error is the call's.
func TestComputeErrorHandsNothing(t *testing.T) {
	g, cpu := emulatedEngine(t, "gpt-a-cat-cpu", 3, 2)
	run := g.compute
	calls, fail := 0, errors.New("device lost")
	g.compute = func() error {
		if calls++; calls == 2 {
			return fail
		}
		return run()
	}
	b := cpu.ProbeWindows(4, 1)
	var handed []int
	err := g.PredictEach(b, make([]float32, 4*rgc.NumClasses), func(n int) { handed = append(handed, n) })
	if !errors.Is(err, fail) || !slices.Equal(handed, []int{2}) {
		t.Fatalf("error %v, handed over %v; want %v and [2]", err, handed, fail)
	}
}

// TestArithmetic: the GPU engine names the GEMMs' arithmetic in force,
// and that is what the flight recorder stores (engine.ArithmeticOf).
func TestArithmetic(t *testing.T) {
	for _, tc := range []struct {
		p    Precision
		want string
	}{{FP32, "cuda fp32"}, {TF32, "cuda tf32"}} {
		e := &Engine{arith: tc.p}
		if got := engine.ArithmeticOf(e); got != tc.want {
			t.Errorf("%s in force: ArithmeticOf = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestWarmThenCapture: every bucket runs once uncaptured before its
// capture, in bucket order, and a failed warm-up stops before its capture
// with an error naming the batch.
func TestWarmThenCapture(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failRun int // bucket whose warm-up fails (-1: none)
		want    []string
	}{
		{"all", -1, []string{"run 0", "capture 0", "run 1", "capture 1", "run 2", "capture 2"}},
		{"second warm-up fails", 1, []string{"run 0", "capture 0", "run 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := warmThenCapture([]int{1, 2, 3},
				func(k int) error {
					got = append(got, fmt.Sprintf("run %d", k))
					if k == tc.failRun {
						return errors.New("boom")
					}
					return nil
				},
				func(k int) error {
					got = append(got, fmt.Sprintf("capture %d", k))
					return nil
				})
			if !slices.Equal(got, tc.want) {
				t.Errorf("calls %v, want %v", got, tc.want)
			}
			if (err != nil) != (tc.failRun >= 0) || err != nil && !strings.Contains(err.Error(), "warm-up of batch 2") {
				t.Errorf("error %v", err)
			}
		})
	}
}

// TestBatchLimit: MaxBatch is capped where a buffer would pass 2^31-1
// floats (the paper CNN: 32,767 windows), every launch of the
// capped engine's largest bucket is within CUDA's limits, and one window
// more would not be.
func TestBatchLimit(t *testing.T) {
	for i, tc := range []struct {
		name string
		want int
	}{{"gpt-a-cat", 32767}, {"gpt-b-logmix-cpu", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p := cpuEngine(t, tc.name, uint64(i+1)).Prepared()
			lim := batchLimit(p)
			if tc.want > 0 && lim != tc.want {
				t.Errorf("limit %d windows, want %d", lim, tc.want)
			}
			for _, op := range newNet(p, lim).plan(lim) {
				if err := op.checkLaunch(); err != nil {
					t.Fatalf("at the limit %d: %v", lim, err)
				}
			}
			over := 0
			for _, op := range newNet(p, lim+1).plan(lim + 1) {
				if op.checkLaunch() != nil {
					over++
				}
			}
			if over == 0 {
				t.Errorf("every launch of %d windows (the limit + 1) passes: the limit is not tight", lim+1)
			}
		})
	}
}

// TestNewRejectsWideHeads: attention heads wider than 32 are refused at
// New, before any CUDA library is looked for.
func TestNewRejectsWideHeads(t *testing.T) {
	cfg, err := model.ParseConfigName("gpt-a-cat-cpu", len(testCells))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Heads, cfg.HeadDim = 1, 64
	_, err = NewFromWeights(model.ParityWeights(cfg, 1), testCells, Options{MaxBatch: 2, LibDirs: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "attention heads of 64") {
		t.Fatalf("head_dim 64: error %v, want one refusing it", err)
	}
}

// TestPrepareChecksLaunches: a launch outside CUDA's limits is an error
// when an engine prepares its plans, not a launch failure on the device.
func TestPrepareChecksLaunches(t *testing.T) {
	e := &Engine{funcs: map[string]cuda.Func{}}
	ok := Op{Layer: "l", Kernel: "biasAct", Grid: cuda.Dim3{X: 1, Y: 1, Z: 1}, Block: cuda.Dim3{X: 256, Y: 1, Z: 1}}
	for _, tc := range []struct {
		name    string
		mod     func(*Op)
		wantErr bool
	}{
		{"fits", func(*Op) {}, false},
		{"block of 2048", func(o *Op) { o.Block.X = 2048 }, true},
		{"grid y of 70000", func(o *Op) { o.Grid.Y = 70000 }, true},
		{"64 KiB shared", func(o *Op) { o.Shared = 64 << 10 }, true},
		{"2^31 floats", func(o *Op) { o.Out = Ref{Arena: arenaActs, Len: 1 << 31} }, true},
	} {
		op := ok
		tc.mod(&op)
		if _, err := e.prepare([]Op{op}); (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
}

// TestEmulationCost: the parity reference's cost per window is measured,
// positive, and the paper CNN's exceeds the small CNN's (its im2col and
// GEMMs are about 7x larger).
func TestEmulationCost(t *testing.T) {
	cost := map[string]time.Duration{}
	for _, name := range []string{"gpt-a-cat", "gpt-a-cat-cpu"} {
		w, err := TestWeights(name, len(testCells), 1)
		if err != nil {
			t.Fatal(err)
		}
		c, err := EmulationCost(w, testCells, 1)
		if err != nil || c <= 0 {
			t.Fatalf("%s: cost %v, %v", name, c, err)
		}
		cost[name] = c
	}
	if cost["gpt-a-cat"] <= cost["gpt-a-cat-cpu"] {
		t.Errorf("per window: paper CNN %v, small CNN %v; want the paper CNN's larger", cost["gpt-a-cat"], cost["gpt-a-cat-cpu"])
	}
	t.Log(cost)
}
