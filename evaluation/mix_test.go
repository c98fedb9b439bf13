package evaluation

import (
	"context"
	"testing"

	"rgcpred/rgc/synth"
)

// TestEvaluateMixture scores mixtures through Evaluate: a checkpoint mixed
// with itself scores exactly as the checkpoint (0.5p + 0.5p = p in float32),
// and a checkpoint mixed with the zero-input baseline has, in every cell, an
// NLL at most the mean of the two (Jensen, window by window).
func TestEvaluateMixture(t *testing.T) {
	cfg, dir := synthConfig(t, synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	a := saveCheckpoint(t, dir, "a.ckpt", 1, cfg.Rec.ClusterIDs())
	env := SpecEnv{Rec: cfg.Rec, Data: dir, Cells: cfg.Cells, Batch: cfg.Batch, Threads: 1}
	for _, s := range []string{"zero", "ckpt:" + a, "mix:self=ckpt:" + a + "+ckpt:" + a, "mix:az=ckpt:" + a + "+zero"} {
		sp, err := ParseSpec(s, env)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Models = append(cfg.Models, sp)
	}
	r, err := Evaluate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	zero, net, self, az := r.Models[0], r.Models[1], r.Models[2], r.Models[3]
	if self.Name != "self" || self.Kind != "mix" || az.Name != "az" {
		t.Fatalf("models %s", r.ModelNames())
	}
	if len(az.Members) != 2 || az.Members[0] != "0.5*ckpt:"+a || az.Members[1] != "0.5*zero" {
		t.Errorf("mixture members %q", az.Members)
	}
	for i := range net.Cells {
		for _, m := range MetricNames {
			if got, want := self.Cells[i].Metric(m), net.Cells[i].Metric(m); got != want {
				t.Errorf("cell %d %s: self-mixture %v, checkpoint %v", i, m, got, want)
			}
		}
		if mix, mean := az.Cells[i].NLL, (net.Cells[i].NLL+zero.Cells[i].NLL)/2; mix > mean+1e-6 {
			t.Errorf("cell %d: mixture NLL %v above the members' mean %v", i, mix, mean)
		}
		if az.Cells[i].NLL == net.Cells[i].NLL {
			t.Errorf("cell %d: mixing in the baseline changed nothing", i)
		}
	}
}
