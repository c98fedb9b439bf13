package gpu

import (
	"errors"
	"slices"
	"testing"

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
