package gpu

import (
	"fmt"
	"testing"

	"rgcpred/base/cuda"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// needGPU skips the test, saying why, where no CUDA driver or GPU is found.
func needGPU(t *testing.T) {
	t.Helper()
	d, err := cuda.Open(0, "")
	if err != nil {
		t.Skipf("no GPU here, the device test does not run: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// gpuEngine returns the GPU engine of the same weights as cpuEngine(name,
// seed).
func gpuEngine(t *testing.T, name string, seed uint64, o Options) *Engine {
	t.Helper()
	w, err := TestWeights(name, len(testCells), seed)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewFromWeights(w, testCells, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// TestDeviceMatchesEngine compares the GPU engine's head outputs with the
// CPU engine's (within ParityTol relative to max(1, |x|)) and its median
// classes, for every configuration, with and without CUDA graphs, on
// batches that fill a bucket, pad one and run in chunks.
func TestDeviceMatchesEngine(t *testing.T) {
	needGPU(t)
	for i, name := range configs {
		for _, graphs := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/graphs=%v", name, graphs), func(t *testing.T) {
				cpu := cpuEngine(t, name, uint64(i+1))
				g := gpuEngine(t, name, uint64(i+1), Options{MaxBatch: 4, NoGraphs: !graphs})
				for _, nb := range []int{1, 3, 4, 9} {
					b := cpu.ProbeWindows(nb, uint64(nb))
					got, want := make([]float32, nb*g.net.headOut), make([]float32, nb*g.net.headOut)
					if err := g.Logits(b, got); err != nil {
						t.Fatal(err)
					}
					if err := cpu.Logits(b, want); err != nil {
						t.Fatal(err)
					}
					if d := maxRelDiff(got, want); d > ParityTol {
						t.Errorf("batch %d: head outputs differ by %.3g", nb, d)
					}
				}
			})
		}
	}
}

// TestDeviceLayerParity runs LayerParity on every configuration: no
// operation's output differs from the CPU emulation by more than
// ParityTol.
func TestDeviceLayerParity(t *testing.T) {
	needGPU(t)
	for i, name := range configs {
		t.Run(name, func(t *testing.T) {
			cpu := cpuEngine(t, name, uint64(i+1))
			g := gpuEngine(t, name, uint64(i+1), Options{MaxBatch: 8, NoGraphs: true})
			rep, err := g.LayerParity(cpu.ProbeWindows(8, 3), cpu)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK {
				t.Errorf("first layer over %g: %s by %.3g; head vs the CPU engine %.3g; %s", ParityTol, rep.FirstOver, rep.FirstOverDiff, rep.HeadVsEngine, rep.ProbsVsEngine)
			}
		})
	}
}

// TestDevicePredictAllocs: a call, Predict or PredictEach, allocates
// nothing.
func TestDevicePredictAllocs(t *testing.T) {
	needGPU(t)
	cpu := cpuEngine(t, "gpt-a-cat", 1)
	g := gpuEngine(t, "gpt-a-cat", 1, Options{MaxBatch: 4})
	b := cpu.ProbeWindows(3, 1)
	out := make([]float32, 3*rgc.NumClasses)
	if a := testing.AllocsPerRun(20, func() {
		if err := g.Predict(b, out); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Predict allocates %.1f times a call", a)
	}
	handed := 0
	done := func(n int) { handed = n }
	if a := testing.AllocsPerRun(20, func() {
		if err := g.PredictEach(b, out, done); err != nil {
			t.Fatal(err)
		}
	}); a != 0 || handed != 3 {
		t.Errorf("PredictEach allocates %.1f times a call, handed over %d windows of 3", a, handed)
	}
}

// TestDeviceTF32 asks for TF32: the engine either runs it with a passing
// parity check or stays FP32 with a failing one, and predicts either way.
func TestDeviceTF32(t *testing.T) {
	needGPU(t)
	g := gpuEngine(t, "gpt-b-cat", 2, Options{MaxBatch: 4, Precision: TF32})
	p, par := g.Precision()
	if par.Windows != probeWindows || (p == TF32) != par.OK() {
		t.Fatalf("precision %s with parity %s", p, par)
	}
	if a := engine.ArithmeticOf(g); a != "cuda "+string(p) {
		t.Errorf("recorded arithmetic %q with %s in force", a, p)
	}
	t.Logf("%s on %s: %s", p, g.Device(), par)
}

// TestBadInput: a window of an unknown cell and a short output are errors,
// and the engine serves the next call.
func TestDeviceBadInput(t *testing.T) {
	needGPU(t)
	cpu := cpuEngine(t, "gpt-a-cat-cpu", 1)
	g := gpuEngine(t, "gpt-a-cat-cpu", 1, Options{MaxBatch: 2})
	b := cpu.ProbeWindows(2, 1)
	out := make([]float32, 2*rgc.NumClasses)
	b.Cells[1] = 999
	if err := g.Predict(b, out); err == nil {
		t.Error("unknown cell: no error")
	}
	b.Cells[1] = testCells[0]
	if err := g.Predict(b, out[:10]); err == nil {
		t.Error("short output: no error")
	}
	if err := g.Predict(b, out); err != nil {
		t.Errorf("after bad calls: %v", err)
	}
}
