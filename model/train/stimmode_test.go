package train

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/rgc"
)

// TestStimModeFlows checks that a run's checkpoints record its recording's
// stimulus mode, that a warm restart may move a model to the other mode
// (fine-tuning) while resuming or scoring on the other mode is refused,
// naming both.
func TestStimModeFlows(t *testing.T) {
	recs := map[rgc.StimMode]*rgc.Recording{}
	for _, m := range []rgc.StimMode{rgc.StimZeroPhase, rgc.StimCausal} {
		rec, err := rgc.LoadMode(shipped, m)
		if err != nil {
			t.Fatal(err)
		}
		recs[m] = rec
	}
	zp, causal := recs[rgc.StimZeroPhase], recs[rgc.StimCausal]
	cells := zp.QualityCells()[:3]
	dir := t.TempDir()
	var log bytes.Buffer
	o := Options{Data: "shipped", Rec: zp, Cells: cells, Config: tinyConfig(model.HeadCat, 3),
		Steps: 4, Batch: 4, LR: 3e-3, ValEvery: 2, ValWindows: 16, Seed: 3, Threads: 2, Out: filepath.Join(dir, "zp.ckpt"), Log: &log}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{o.Out, o.Out + ".resume"} {
		ck, err := model.LoadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if ck.StimMode != rgc.StimZeroPhase {
			t.Errorf("%s records %v, want zero-phase", filepath.Base(path), ck.StimMode)
		}
	}
	// Fine-tuning on causal bins from the zero-phase checkpoint.
	o2 := o
	o2.Rec, o2.Init, o2.Out = causal, o.Out, filepath.Join(dir, "causal.ckpt")
	if _, err := Run(context.Background(), o2); err != nil {
		t.Fatal(err)
	}
	ft, err := model.LoadCheckpoint(o2.Out)
	if err != nil {
		t.Fatal(err)
	}
	if ft.StimMode != rgc.StimCausal {
		t.Errorf("fine-tuned checkpoint records %v, want causal", ft.StimMode)
	}
	// Resuming the zero-phase run on causal bins is refused.
	o3 := o
	o3.Rec, o3.Resume, o3.Out = causal, o.Out+".resume", filepath.Join(dir, "resumed.ckpt")
	_, err = Run(context.Background(), o3)
	if err == nil || !strings.Contains(err.Error(), "trained on zero-phase") || !strings.Contains(err.Error(), "input is causal") {
		t.Errorf("resume on the other mode: %v", err)
	}
	if _, err := os.Stat(o3.Out); err == nil {
		t.Error("a refused resume wrote a checkpoint")
	}
	// Scoring on the other mode is refused, both ways.
	zpck, err := model.LoadCheckpoint(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ck  *model.Checkpoint
		rec *rgc.Recording
	}{{zpck, causal}, {ft, zp}} {
		_, err := Score(context.Background(), tc.ck, tc.rec, rgc.Val, cells, 8, 1)
		if err == nil || !strings.Contains(err.Error(), "trained on "+tc.ck.StimMode.String()) || !strings.Contains(err.Error(), "input is "+tc.rec.StimMode.String()) {
			t.Errorf("%v model scored on %v bins: %v", tc.ck.StimMode, tc.rec.StimMode, err)
		}
	}
}
