package modelload

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

func TestResolve(t *testing.T) {
	// The test runs in serve/modelload: a repository-relative path
	// resolves through the repository root.
	p, err := Resolve("serve/modelload/modelload.go")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Contains(b, []byte("package modelload")) {
		t.Fatalf("resolved %s: %v", p, err)
	}
	if p, err := Resolve("modelload.go"); err != nil || p != "modelload.go" {
		t.Errorf("a path in the working directory resolved to %q, %v; want it as is", p, err)
	}
	_, err = Resolve("models/nope.ckpt")
	if err == nil || !strings.Contains(err.Error(), "models/nope.ckpt not found") || !strings.Contains(err.Error(), "--model") {
		t.Errorf("missing model error %v", err)
	}
	abs := filepath.Join(t.TempDir(), "nope.ckpt")
	if _, err := Resolve(abs); err == nil || !strings.Contains(err.Error(), abs) {
		t.Errorf("missing absolute path: %v", err)
	}
}

func TestRepoRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := RepoRoot(wd)
	if root == "" || filepath.Join(root, "serve", "modelload") != wd {
		t.Errorf("RepoRoot(%s) = %q", wd, root)
	}
	if got := RepoRoot(t.TempDir()); got != "" {
		t.Errorf("RepoRoot of a temporary directory = %q, want none", got)
	}
}

// checkpoint writes a small random checkpoint for cells ids, its output
// head scaled by headScale (x300 fails the int8 parity check at load, x1
// passes it).
func checkpoint(t *testing.T, ids []int, headScale float32) (string, *model.Checkpoint) {
	t.Helper()
	cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	w := model.InitWeights(cfg, rand.New(rand.NewPCG(3, 4)))
	for name, ts := range w.Tensors {
		if strings.HasPrefix(name, "head.") {
			for i := range ts {
				ts[i] *= headScale
			}
		}
	}
	ck := &model.Checkpoint{Weights: w, CellIDs: ids, BinRateHz: rgc.BinRateHz, WindowBins: rgc.WindowBins, Horizon: rgc.Horizon,
		Provenance: model.Provenance{Data: "random", Steps: 7, TrainedAt: "2026-01-01T00:00:00Z"}}
	path := filepath.Join(t.TempDir(), "m.ckpt")
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
	return path, ck
}

// TestEngine: the loader serves the checkpoint's cells on the CPU engine
// with the threads asked for as its gather width, its batch bound (every
// cell by default), its time base, and in the arithmetic its name states:
// fp32 as asked; int8 where it runs (here on the portable kernels) and
// passes its parity check; the fallback, named with its reason, where the
// CPU lacks the instructions or the check fails. The model predicts valid
// distributions and closes. A missing or corrupt checkpoint is an error
// naming its path.
func TestEngine(t *testing.T) {
	ids := []int{11, 22, 33}
	good, ck := checkpoint(t, ids, 1)
	sharp, _ := checkpoint(t, ids, 300)
	// What --precision int8 serves with this CPU's own kernels.
	native := engine.FP32
	switch {
	case engine.Native(engine.INT8):
		native = engine.INT8
	case engine.Native(engine.BF16):
		native = engine.BF16
	}
	for _, tc := range []struct {
		name      string
		path      string
		prec      engine.Precision
		portable  bool
		maxBatch  int
		want      engine.Precision
		nameParts []string
	}{
		{"fp32", good, engine.FP32, false, 2, engine.FP32, []string{"), fp32"}},
		{"int8 on the portable kernels", good, engine.INT8, true, 0, engine.INT8, []string{"), int8 (parity with fp32: 16 windows"}},
		{"int8 failing its check", sharp, engine.INT8, true, 0, engine.FP32, []string{"), fp32 (int8 asked for, failed its parity check: 16 windows"}},
		{"int8 on this CPU's kernels", good, engine.INT8, false, 0, native, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.portable {
				engine.UsePortable(true)
				defer engine.UsePortable(false)
			}
			m, err := Engine(2, tc.prec)(tc.path, tc.maxBatch)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := m.Close(); err != nil {
					t.Error(err)
				}
			}()
			if got := engine.PrecisionOf(m.Predictor); got != tc.want {
				t.Errorf("serves %s, want %s (%s)", got, tc.want, m.Name)
			}
			parts := append([]string{ck.Weights.Config.Name() + " (data random", "7 steps", "trained 2026-01-01T00:00:00Z"}, tc.nameParts...)
			if !engine.Native(tc.prec) && !tc.portable {
				parts = append(parts, "), "+string(tc.want)+" ("+string(tc.prec)+" asked for: this CPU lacks its instructions)")
			}
			for _, p := range parts {
				if !strings.Contains(m.Name, p) {
					t.Errorf("name %q lacks %q", m.Name, p)
				}
			}
			wantBatch := tc.maxBatch
			if wantBatch == 0 {
				wantBatch = len(ids)
			}
			if !slices.Equal(m.Cells, ids) || m.MaxBatch != wantBatch || m.Gather != 2 || m.BinRateHz != rgc.BinRateHz ||
				m.WindowBins != rgc.WindowBins || m.Horizon != rgc.Horizon {
				t.Errorf("model %+v: want cells %v, max batch %d, gather 2, the checkpoint's time base", *m, ids, wantBatch)
			}
			b := &rgc.Batch{Inputs: make([]float32, 2*rgc.WindowLen), Cells: []int{22, 33}, Ends: []int{rgc.WindowBins - 1, rgc.WindowBins}}
			for i := range b.Inputs {
				b.Inputs[i] = float32(i%7) / 7
			}
			out := make([]float32, 2*rgc.NumClasses)
			if err := m.Predictor.Predict(b, out); err != nil {
				t.Fatal(err)
			}
			for w := range 2 {
				var sum float64
				for _, p := range out[w*rgc.NumClasses : (w+1)*rgc.NumClasses] {
					if !(p >= 0) {
						t.Fatalf("window %d: probability %v", w, p)
					}
					sum += float64(p)
				}
				if math.Abs(sum-1) > 1e-4 {
					t.Errorf("window %d: probabilities sum to %v", w, sum)
				}
			}
		})
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.ckpt")
	if err := os.WriteFile(corrupt, []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{corrupt, filepath.Join(t.TempDir(), "missing.ckpt")} {
		if _, err := Engine(1, engine.FP32)(path, 0); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("checkpoint %s: error %v, want one naming it", path, err)
		}
	}
}
