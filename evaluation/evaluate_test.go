package evaluation

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
)

// synthConfig loads a small synthetic recording and returns an evaluation
// of all its cells, without models.
func synthConfig(t *testing.T, cfg synth.Config) (Config, string) {
	t.Helper()
	dir := testrec.SynthDir(t, cfg)
	rec, err := rgc.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cells := make([]int, len(rec.Cells))
	for i := range cells {
		cells[i] = i
	}
	return Config{Options: Options{Rec: rec, Cells: cells, Split: rgc.Test, Batch: 64, NLLStride: 50,
		Resamples: rollout.DefaultResamples, Seed: 1}, SigmaMs: rollout.DefaultSigmaMs}, dir
}

// saveCheckpoint writes a random-weight checkpoint of cells cellIDs.
func saveCheckpoint(t *testing.T, dir, name string, seed uint64, cellIDs []int) string {
	t.Helper()
	cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(cellIDs))
	if err != nil {
		t.Fatal(err)
	}
	ck := &model.Checkpoint{Weights: model.InitWeights(cfg, rand.New(rand.NewPCG(seed, 1))), CellIDs: cellIDs,
		BinRateHz: rgc.BinRateHz, WindowBins: rgc.WindowBins, Horizon: rgc.Horizon}
	path := filepath.Join(dir, name)
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvaluateCheckpoints evaluates random-weight checkpoints through the
// engine: one model given as two repeats (its scores the repeats' mean per
// cell), a baseline, a comparison, and a checkpoint that lacks a cell.
func TestEvaluateCheckpoints(t *testing.T) {
	cfg, dir := synthConfig(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	ids := cfg.Rec.ClusterIDs()
	a, b1, b2 := saveCheckpoint(t, dir, "a.ckpt", 1, ids), saveCheckpoint(t, dir, "b1.ckpt", 2, ids), saveCheckpoint(t, dir, "b2.ckpt", 3, ids)
	partial := saveCheckpoint(t, dir, "partial.ckpt", 4, ids[:1])
	env := SpecEnv{Rec: cfg.Rec, Data: dir, Cells: cfg.Cells, Batch: cfg.Batch, Threads: 1}
	spec := func(s string) ModelSpec {
		sp, err := ParseSpec(s, env)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	for _, tc := range []struct {
		name    string
		models  []string
		compare []string
		err     string
	}{
		{"repeats and a baseline", []string{"zero", "ckpt:" + a, "ckpt:" + b1 + "," + b2}, []string{"a:zero"}, ""},
		{"checkpoint lacking a cell", []string{"ckpt:" + partial}, nil, fmt.Sprintf("does not know cells [%d]", ids[1])},
		{"comparison of an unknown model", []string{"zero"}, []string{"zero:glm"}, "two of the evaluated models (zero)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Models, c.Compare = nil, tc.compare
			for _, m := range tc.models {
				c.Models = append(c.Models, spec(m))
			}
			r, err := Evaluate(context.Background(), c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Models) != 3 || r.Models[1].Name != "a" || r.Models[2].Name != "b1 (x2)" || len(r.Comparisons) != 1 {
				t.Fatalf("models %s, %d comparisons", r.ModelNames(), len(r.Comparisons))
			}
			rep := r.Models[2]
			if len(rep.Repeats) != 2 || len(rep.Cells) != 2 || rep.NLLStride != 50 || len(rep.Checkpoints) != 2 {
				t.Fatalf("repeats model: %d repeats, %d cells, stride %d", len(rep.Repeats), len(rep.Cells), rep.NLLStride)
			}
			for i := range rep.Cells {
				for _, name := range MetricNames {
					want := (rep.Repeats[0][i].Metric(name) + rep.Repeats[1][i].Metric(name)) / 2
					if got := rep.Cells[i].Metric(name); math.Abs(got-want) > 1e-12 {
						t.Errorf("cell %d %s: %v, want the repeats' mean %v", i, name, got, want)
					}
				}
			}
			if rep.Repeats[0][0].NLL == rep.Repeats[1][0].NLL {
				t.Error("the two repeats scored identically; different weights expected")
			}
			if d := r.Comparisons[0].Metrics["nll"]; math.Abs(d.Mean-(mean(r.Models[1].Cells, "nll")-mean(r.Models[0].Cells, "nll"))) > 1e-9 {
				t.Errorf("comparison a - zero: mean NLL difference %v", d.Mean)
			}
		})
	}
}

func mean(cells []CellScores, metric string) float64 {
	var s float64
	for i := range cells {
		s += cells[i].Metric(metric)
	}
	return s / float64(len(cells))
}

// TestEvaluateStagger: staggered starts reach the rollout and the report:
// the first cell by cluster id (offset 0) scores exactly as without them,
// the second of two (offset 40 bins) gets a different rollout.
func TestEvaluateStagger(t *testing.T) {
	cfg, dir := synthConfig(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	var res [2]*Report
	for i, stagger := range []bool{false, true} {
		c := cfg
		c.Stagger = stagger
		c.Models = []ModelSpec{OracleSpec(dir, rgc.StimCausal)}
		r, err := Evaluate(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stagger != stagger {
			t.Fatalf("report stagger %v, want %v", r.Stagger, stagger)
		}
		res[i] = r
	}
	a, b := res[0].Models[0].Cells, res[1].Models[0].Cells
	if len(a) != 2 || len(b) != 2 || a[0].ClusterID > a[1].ClusterID {
		t.Fatalf("cells %+v / %+v, want 2 in ascending cluster id", a, b)
	}
	if a[0] != b[0] {
		t.Errorf("cell with offset 0 differs under stagger: %+v vs %+v", a[0], b[0])
	}
	if a[1].Windows == b[1].Windows && a[1].GeneratedSpikes == b[1].GeneratedSpikes && a[1].VanRossum == b[1].VanRossum {
		t.Errorf("cell with offset 40 unchanged under stagger: %+v", b[1])
	}
}
