package gpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// configs are the four stem/head combinations with both CNN presets.
var configs = []string{"gpt-a-cat", "gpt-a-logmix", "gpt-b-cat", "gpt-b-logmix",
	"gpt-a-cat-cpu", "gpt-a-logmix-cpu", "gpt-b-cat-cpu", "gpt-b-logmix-cpu"}

var testCells = []int{12, 40, 7}

// cpuEngine returns the CPU engine for config name with random weights
// (TestWeights) on testCells.
func cpuEngine(t testing.TB, name string, seed uint64) *engine.Engine {
	t.Helper()
	w, err := TestWeights(name, len(testCells), seed)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.NewFromWeights(w, testCells, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestPlanMatchesEngine runs each configuration's GPU plan on the CPU,
// every kernel emulated thread by thread inside the regions its launch
// declares (so a wrong grid, offset or bound panics), and compares the
// head outputs with the CPU engine's: within ParityTol (1e-4) of the
// larger of 1 and the output's size. Batches of 1 and 3 windows (the paper
// CNN's, slower to emulate: 2), in an engine sized for 4, so that regions
// are shared by buckets as on the device.
func TestPlanMatchesEngine(t *testing.T) {
	for i, name := range configs {
		t.Run(name, func(t *testing.T) {
			e := cpuEngine(t, name, uint64(i+1))
			n := newNet(e.Prepared(), 4)
			batches := []int{1, 3}
			if !strings.HasSuffix(name, "-cpu") {
				batches = []int{2}
			}
			for _, nb := range batches {
				b := e.ProbeWindows(nb, uint64(10+i))
				want := make([]float32, nb*n.headOut)
				if err := e.Logits(b, want); err != nil {
					t.Fatal(err)
				}
				host := make([]float32, n.hostLen())
				if err := n.stage(host, b, 0, nb, rowsOf(testCells)); err != nil {
					t.Fatal(err)
				}
				acts := n.emulatePlan(n.plan(nb), host, nil)
				got := acts[n.logits.off : n.logits.off+nb*n.headOut]
				d := maxRelDiff(got, want)
				if d > ParityTol {
					t.Errorf("batch %d: head outputs differ from the CPU engine's by %.3g (relative to max(1, |x|))", nb, d)
				}
				t.Logf("batch %d: head outputs within %.2g of the CPU engine's", nb, d)
			}
		})
	}
}

// TestPlanLayers checks the layer sequence against the model's: every
// parameter tensor of the configuration is read by some operation of the
// layer it belongs to, every layer the CPU engine runs appears in the
// model's order, and each operation writes only activations.
func TestPlanLayers(t *testing.T) {
	for i, name := range configs {
		t.Run(name, func(t *testing.T) {
			e := cpuEngine(t, name, uint64(i+1))
			p := e.Prepared()
			n := newNet(p, 2)
			ops := n.plan(2)
			var layers []string
			for _, op := range ops {
				if op.Out.Arena != arenaActs {
					t.Errorf("%s (%s) writes the weights", op.Layer, op.Kernel)
				}
				if len(layers) == 0 || layers[len(layers)-1] != op.Layer {
					layers = append(layers, op.Layer)
				}
			}
			want := []string{"cnn.conv1", "cnn.conv2"}
			for b := range p.Blocks {
				pre := fmt.Sprintf("cnn.blocks.%d.", b)
				want = append(want, pre+"conv1", pre+"conv2", pre+"conv3")
				if p.Blocks[b].Shortcut != nil {
					want = append(want, pre+"shortcut")
				}
				want = append(want, pre+"se", pre+"out")
			}
			if p.Proj != nil {
				want = append(want, "gpt.proj")
			}
			want = append(want, "gpt.embed")
			for l := range p.Layers {
				pre := fmt.Sprintf("gpt.blocks.%d.", l)
				want = append(want, pre+"ln1", pre+"attn.qkv", pre+"attn", pre+"attn.proj", pre+"ln2", pre+"mlp.fc", pre+"mlp.proj")
			}
			want = append(want, "gpt.ln_f", "head")
			if strings.Join(layers, " ") != strings.Join(want, " ") {
				t.Errorf("layers\n%v\nwant\n%v", layers, want)
			}
			// Each layer with weights reads every tensor Config.Params gives it.
			for _, ps := range p.Config.Params() {
				if strings.Contains(ps.Name, "running_") || strings.HasPrefix(ps.Name, "gpt.cell_emb") || strings.HasPrefix(ps.Name, "gpt.pos_emb") {
					continue
				}
				layer := ps.Name[:strings.LastIndexByte(ps.Name, '.')]
				layer = strings.Replace(layer, ".bn", ".conv", 1) // bn1 folds into conv1
				layer = strings.Replace(layer, "shortcut.conv", "shortcut", 1)
				layer = strings.Replace(layer, "shortcut.bn", "shortcut", 1)
				layer = strings.TrimSuffix(strings.TrimSuffix(layer, ".fc1"), ".fc2")
				if !slicesContains(layers, layer) {
					t.Errorf("parameter %s: no operation of layer %s", ps.Name, layer)
				}
			}
		})
	}
}

func slicesContains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestWeightLayout checks the weights arena against the CPU engine's
// prepared weights, tensor by tensor: the folded convolutions, linear
// layers and norms sit at their regions, aligned, and nothing overlaps.
func TestWeightLayout(t *testing.T) {
	e := cpuEngine(t, "gpt-b-logmix", 3)
	p := e.Prepared()
	n := newNet(p, 1)
	type tensor struct {
		name string
		r    Ref
		want []float32
	}
	ts := []tensor{{"conv1.w", n.conv1.w, p.Conv1.W}, {"conv1.b", n.conv1.bias, p.Conv1.Bias},
		{"conv2.w", n.conv2.w, p.Conv2.W}, {"cell", n.cell, p.CellEmb}, {"pos", n.pos, p.PosEmb},
		{"ln_f.w", n.lnfw, p.LNFW}, {"head.w", n.head.w, p.Head.W}, {"head.b", n.head.bias, p.Head.Bias},
		{"proj.w", n.proj.w, p.Proj.W}}
	for i, b := range n.blocks {
		ts = append(ts, tensor{fmt.Sprintf("block%d.conv2.w", i), b.conv2.w, p.Blocks[i].Conv2.W},
			tensor{fmt.Sprintf("block%d.se2.b", i), b.se2.bias, p.Blocks[i].SE2.Bias})
		if b.shortcut != nil {
			ts = append(ts, tensor{fmt.Sprintf("block%d.shortcut.w", i), b.shortcut.w, p.Blocks[i].Shortcut.W})
		}
	}
	for i, l := range n.layers {
		ts = append(ts, tensor{fmt.Sprintf("layer%d.qkv.w", i), l.qkv.w, p.Layers[i].QKV.W},
			tensor{fmt.Sprintf("layer%d.ln2.b", i), l.ln2b, p.Layers[i].LN2B})
	}
	for _, tc := range ts {
		if tc.r.Off%align != 0 || tc.r.Len != len(tc.want) {
			t.Errorf("%s: region %+v, want %d floats aligned to %d", tc.name, tc.r, len(tc.want), align)
			continue
		}
		for j, v := range tc.want {
			if n.w.data[tc.r.Off+j] != v {
				t.Errorf("%s[%d] = %g, want %g", tc.name, j, n.w.data[tc.r.Off+j], v)
				break
			}
		}
	}
	// The folded conv's layout is the CPU engine's: [k*cin][cout], from
	// the checkpoint's [cout][cin][k] scaled by gamma/sqrt(var+eps).
	w, _ := TestWeights("gpt-b-logmix", len(testCells), 3)
	k, g, v := w.Get("cnn.conv1.weight"), w.Get("cnn.bn1.weight"), w.Get("cnn.bn1.running_var")
	c := p.Conv1
	o, i, tap := 5, 3, 7
	want := float64(k[(o*c.Cin+i)*c.K+tap]) * float64(g[o]) / math.Sqrt(float64(v[o])+model.BNEps)
	if got := float64(n.w.data[n.conv1.w.Off+(tap*c.Cin+i)*c.Cout+o]); math.Abs(got-want) > 1e-6*math.Abs(want) {
		t.Errorf("conv1 tap %d, in %d, out %d = %g, want %g", tap, i, o, got, want)
	}
}

// TestActivationLayout checks that the activation buffers of maxBatch
// windows do not overlap, are aligned, and that every op of every bucket
// stays inside the arena.
func TestActivationLayout(t *testing.T) {
	e := cpuEngine(t, "gpt-a-cat", 1)
	const maxBatch = 6
	n := newNet(e.Prepared(), maxBatch)
	end := 0
	for _, b := range n.lay.bufs {
		if b.off%align != 0 || b.off < end {
			t.Errorf("%s at %d: misaligned or overlapping the previous buffer (ends at %d)", b.name, b.off, end)
		}
		end = b.off + b.windows(maxBatch)*b.per
	}
	if end > n.lay.total {
		t.Errorf("buffers end at %d, the arena has %d", end, n.lay.total)
	}
	if n.in.off != 0 || n.rows.off < maxBatch*rgc.WindowLen {
		t.Errorf("inputs at %d and rows at %d: the host copy must hold inputs then rows", n.in.off, n.rows.off)
	}
	for _, nb := range buckets(maxBatch) {
		for _, op := range n.plan(nb) {
			refs := []Ref{op.Out}
			for _, a := range op.Args {
				if a.Ref != nil {
					refs = append(refs, *a.Ref)
				}
			}
			if op.Gemm != nil {
				refs = append(refs, op.Gemm.A, op.Gemm.W, op.Gemm.C)
			}
			for _, r := range refs {
				size := n.lay.total
				if r.Arena == arenaWeights {
					size = len(n.w.data)
				}
				if r.Off < 0 || r.Len < 0 || r.Off+r.Len > size {
					t.Errorf("batch %d, %s (%s): region %+v outside the arena of %d", nb, op.Layer, op.Kernel, r, size)
				}
				if r.Arena != arenaActs {
					continue
				}
				// An activation region lies inside one buffer's room.
				inside := false
				for _, b := range n.lay.bufs {
					if r.Off >= b.off && r.Off+r.Len <= b.off+b.windows(maxBatch)*b.per {
						inside = true
					}
				}
				if !inside {
					t.Errorf("batch %d, %s (%s): region %+v crosses buffers", nb, op.Layer, op.Kernel, r)
				}
			}
		}
	}
}

// TestLaunchLimits checks every launch of every bucket of a large engine
// (8192 windows, the device check's largest batch) against CUDA's grid,
// block and shared-memory limits, and that no region's size overflows the
// kernels' 32-bit ints.
func TestLaunchLimits(t *testing.T) {
	for i, name := range []string{"gpt-a-cat", "gpt-b-logmix", "gpt-a-cat-cpu"} {
		t.Run(name, func(t *testing.T) {
			e := cpuEngine(t, name, uint64(i+1))
			n := newNet(e.Prepared(), 8192)
			for _, nb := range buckets(8192) {
				for _, op := range n.plan(nb) {
					if err := op.checkLaunch(); err != nil {
						t.Fatalf("batch %d: %v", nb, err)
					}
					if op.Out.Len >= 1<<31 {
						t.Fatalf("batch %d, %s: %d floats overflow an int", nb, op.Layer, op.Out.Len)
					}
				}
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want []int
	}{
		{1, []int{1}}, {2, []int{1, 2}}, {60, []int{1, 2, 4, 8, 16, 32, 60}}, {64, []int{1, 2, 4, 8, 16, 32, 64}},
	} {
		got := buckets(tc.max)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("buckets(%d) = %v, want %v", tc.max, got, tc.want)
		}
		for n := 1; n <= tc.max; n++ {
			b := got[bucketIndex(got, n)]
			if b < n || (b > 1 && b/2 >= n && b != tc.max) {
				t.Errorf("bucket of %d windows: %d with buckets %v", n, b, got)
			}
		}
	}
}

// TestPlanIm2colInParts: where a batch unrolls beyond colBudget, each
// convolution's im2col and GEMM run on parts of the batch; the head
// outputs are still the CPU engine's within ParityTol, with parts of one
// window and of two (a last part shorter), and the column buffer holds
// only colWindows windows.
func TestPlanIm2colInParts(t *testing.T) {
	for i, name := range []string{"gpt-a-cat-cpu", "gpt-b-logmix-cpu"} {
		t.Run(name, func(t *testing.T) {
			e := cpuEngine(t, name, uint64(i+5))
			const nb = 3
			b := e.ProbeWindows(nb, 7)
			want := make([]float32, nb*e.Config().HeadOut())
			if err := e.Logits(b, want); err != nil {
				t.Fatal(err)
			}
			for _, part := range []int{1, 2} {
				n := newNet(e.Prepared(), 4)
				n.colWindows = part // the buffer holds more: parts use its start
				host := make([]float32, n.hostLen())
				if err := n.stage(host, b, 0, nb, rowsOf(testCells)); err != nil {
					t.Fatal(err)
				}
				ops := n.plan(nb)
				cols := 0
				for _, op := range ops {
					if op.Kernel == "im2col" {
						cols++
						if op.Grid.Y > part {
							t.Errorf("%s: im2col of %d windows in parts of %d", op.Layer, op.Grid.Y, part)
						}
					}
				}
				acts := n.emulatePlan(ops, host, nil)
				if d := maxRelDiff(acts[n.logits.off:n.logits.off+nb*n.headOut], want); d > ParityTol {
					t.Errorf("parts of %d windows (%d im2col passes): head outputs differ by %.3g", part, cols, d)
				}
			}
		})
	}
	// The paper CNN unrolls 229,376 floats a window: 73 windows a pass,
	// whatever MaxBatch.
	n := newNet(cpuEngine(t, "gpt-a-cat", 1).Prepared(), 1000)
	if n.colWindows != colBudget/229376 || n.col.windows(1000) != n.colWindows {
		t.Errorf("paper CNN: %d windows a pass, buffer for %d; want %d", n.colWindows, n.col.windows(1000), colBudget/229376)
	}
}
