package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/rgc"
)

// validState returns a consistent training state of the tiny 2-cell model
// after 3 optimiser steps (moments of every trainable tensor, a weight
// average), one validation and a 3-point history.
func validState(t testing.TB) (*state, model.Config) {
	t.Helper()
	cfg := tinyConfig(model.HeadCat, 2)
	w := model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2)))
	st := &state{Steps: 10, Batch: 4, LR: 1e-3, Seed: 3, Opt: NewAdamW(), Stop: NewEarlyStop(), BestVal: 4.2, BestStep: 2,
		Elapsed: 1.5, ZeroPooled: 4.5, ZeroCell: 4.4}
	grad := func(name string) []float32 {
		g := make([]float32, len(w.Tensors[name]))
		for i := range g {
			g[i] = 0.01 * float32(i%7-3)
		}
		return g
	}
	st.EMA = NewEMA(w, 0.9)
	for s := 1; s <= 3; s++ {
		st.Opt.Update(w, grad, 1e-3)
		st.EMA.Update(w)
		st.Step = s
		val := math.NaN()
		if s == 2 {
			val = 4.2
			st.Stop.Observe(val, false)
		}
		st.History = append(st.History, Point{Step: s, TrainLoss: 4.3, Val: val, LR: 1e-3, ElapsedSecs: 0.5 * float64(s)})
	}
	return st, cfg
}

// encodeState gob-encodes a state as saveResume does.
func encodeState(t testing.TB, st *state) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(st); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecodeStateErrors corrupts one field of a valid training state at a
// time: decodeState must refuse each with an error naming the field, and
// accept the valid state unchanged.
func TestDecodeStateErrors(t *testing.T) {
	const head = "head.weight"
	tests := []struct {
		name   string
		mutate func(st *state)
		raw    func(b []byte) []byte // applied to the encoded bytes when set
		steps  int                   // the checkpoint provenance's steps; 0 means st.Step
		want   string                // "" for success
	}{
		{"valid", func(st *state) {}, nil, 0, ""},
		{"no optimiser", func(st *state) { st.Opt = nil }, nil, 0, "optimiser: epsilon 0"},
		{"no early stopping", func(st *state) { st.Stop = nil }, nil, 0, "early stopping: missing"},
		{"moments too short", func(st *state) { st.Opt.M[head] = st.Opt.M[head][:3] }, nil, 0, "moments of head.weight hold 3 and"},
		{"second moments too long", func(st *state) { st.Opt.V[head] = append(st.Opt.V[head], 1) }, nil, 0, "moments of head.weight hold"},
		{"moments of a statistic", func(st *state) {
			st.Opt.M["cnn.bn1.running_var"], st.Opt.V["cnn.bn1.running_var"] = []float32{0, 0}, []float32{0, 0}
		}, nil, 0, `moments of "cnn.bn1.running_var", not a trainable tensor`},
		{"moments of an unknown tensor", func(st *state) { st.Opt.M["x"], st.Opt.V["x"] = []float32{1}, []float32{1} }, nil, 0, `moments of "x", not a trainable tensor`},
		{"no second moments", func(st *state) { delete(st.Opt.V, head) }, nil, 0, "first but no second moments of head.weight"},
		{"no first moments", func(st *state) { delete(st.Opt.M, head) }, nil, 0, `second but no first moments of "head.weight"`},
		{"NaN moment", func(st *state) { st.Opt.M[head][0] = float32(math.NaN()) }, nil, 0, "moments of head.weight[0] are NaN"},
		{"negative second moment", func(st *state) { st.Opt.V[head][1] = -1 }, nil, 0, "moments of head.weight[1]"},
		{"beta 1", func(st *state) { st.Opt.Beta1 = 1 }, nil, 0, "betas 1, 0.99"},
		{"optimiser steps", func(st *state) { st.Opt.Step = 7 }, nil, 0, "7 updates for 3 training steps"},
		{"negative step", func(st *state) { st.Step = -1 }, nil, -1, "step -1 outside the plan"},
		{"step past the plan", func(st *state) { st.Step = 11 }, nil, 11, "step 11 outside the plan of 10 steps"},
		{"step not the checkpoint's", func(st *state) {}, nil, 5, "step 3, but the checkpoint's provenance says 5 steps"},
		{"no planned steps", func(st *state) { st.Steps = 0 }, nil, 0, "planned steps 0"},
		{"huge plan", func(st *state) { st.Steps = math.MaxInt }, nil, 0, fmt.Sprintf("planned steps %d", math.MaxInt)},
		{"batch 0", func(st *state) { st.Batch = 0 }, nil, 0, "batch 0, want 1..16384"},
		{"batch huge", func(st *state) { st.Batch = math.MaxInt }, nil, 0, fmt.Sprintf("batch %d, want 1..16384", math.MaxInt)},
		{"NaN rate", func(st *state) { st.LR = math.NaN() }, nil, 0, "learning rate NaN"},
		{"negative rate", func(st *state) { st.LR = -1 }, nil, 0, "learning rate -1"},
		{"negative budget", func(st *state) { st.Budget = -1 }, nil, 0, "time budget -1"},
		{"infinite elapsed", func(st *state) { st.Elapsed = math.Inf(1) }, nil, 0, "elapsed time +Inf"},
		{"distill 2", func(st *state) { st.Distill = 2 }, nil, 0, "distillation weight 2"},
		{"distill end 0", func(st *state) { st.Distill, st.DistillEnd = 0.5, 0 }, nil, 0, "distillation end 0"},
		{"best step ahead", func(st *state) { st.BestStep = 9 }, nil, 0, "best step 9 outside the 3 steps taken"},
		{"NaN best", func(st *state) { st.BestVal = math.NaN() }, nil, 0, "best validation loss NaN"},
		{"infinite best at a step", func(st *state) { st.BestVal = math.Inf(1) }, nil, 0, "best validation loss +Inf at step 2"},
		{"unknown precision", func(st *state) { st.Precision = "fp16" }, nil, 0, `precision "fp16", want "fp32" or "bf16"`},
		{"bf16", func(st *state) { st.Precision = PrecisionBF16 }, nil, 0, ""},
		{"no weight average", func(st *state) { st.EMA = nil }, nil, 0, ""},
		{"average decay 1", func(st *state) { st.EMA.Decay = 1 }, nil, 0, "weight average: decay 1, want within (0, 1)"},
		{"average decay 0", func(st *state) { st.EMA.Decay = 0 }, nil, 0, "weight average: decay 0"},
		{"average updates", func(st *state) { st.EMA.Step = 2 }, nil, 0, "weight average: 2 updates for 3 training steps"},
		{"average tensor missing", func(st *state) { delete(st.EMA.Tensors, head) }, nil, 0, "weight average: weights:"},
		{"average tensor short", func(st *state) { st.EMA.Tensors[head] = st.EMA.Tensors[head][:2] }, nil, 0,
			"weight average: weights: tensor head.weight has 2 values"},
		{"average NaN", func(st *state) { st.EMA.Tensors["cnn.bn1.running_var"][0] = float32(math.NaN()) }, nil, 0,
			"weight average: weights: tensor cnn.bn1.running_var[0] is NaN"},
		{"patience 0", func(st *state) { st.Stop.Patience = 0 }, nil, 0, "early stopping: patience 0"},
		{"evaluations ahead", func(st *state) { st.Stop.N = 50 }, nil, 0, "early stopping: 50 evaluations after 3 steps"},
		{"since ahead", func(st *state) { st.Stop.Since = 2 }, nil, 0, "early stopping: 2 evaluations since the best of 1"},
		{"history too long", func(st *state) { st.History = append(st.History, Point{Step: 4}) }, nil, 0, "history of 4 points for 3 steps"},
		{"history unordered", func(st *state) { st.History[1].Step = 1 }, nil, 0, "history[1] at step 1, want after step 1"},
		{"history NaN loss", func(st *state) { st.History[0].TrainLoss = math.NaN() }, nil, 0, "history[0] (step 1): training loss NaN"},
		{"trailing bytes", func(st *state) {}, func(b []byte) []byte { return append(b, 1, 2, 3) }, 0, "3 trailing bytes"},
		{"truncated", func(st *state) {}, func(b []byte) []byte { return b[:len(b)/2] }, 0, "decode training state"},
		{"garbage", func(st *state) {}, func(b []byte) []byte { return []byte("not a gob stream") }, 0, "decode training state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, cfg := validState(t)
			tc.mutate(st)
			b := encodeState(t, st)
			if tc.raw != nil {
				b = tc.raw(b)
			}
			steps := tc.steps
			if steps == 0 {
				steps = st.Step
			}
			got, err := decodeState(b, cfg, steps)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.Step != st.Step || got.BestVal != st.BestVal || len(got.Opt.M) != len(st.Opt.M) || len(got.History) != len(st.History) {
					t.Errorf("decoded state differs: step %d best %v, %d moments, %d points", got.Step, got.BestVal, len(got.Opt.M), len(got.History))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// errCrash simulates the trainer stopping between two saves.
var errCrash = errors.New("simulated crash")

// setResumeState rewrites the training state of the resume checkpoint at
// path with mutate applied.
func setResumeState(t *testing.T, path string, mutate func(st *state)) {
	t.Helper()
	ck, st := readResume(t, path)
	mutate(st)
	ck.TrainState = encodeState(t, st)
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
}

// TestRecordedBest reads the best validation a resume checkpoint's state
// records: the loss and step after a validation, none before the first
// (+Inf at step 0), and an error for a checkpoint without a readable
// state.
func TestRecordedBest(t *testing.T) {
	tests := []struct {
		name     string
		state    func(st *state) []byte // the checkpoint's training state
		wantStep int
		wantVal  float64
		wantOK   bool
		wantErr  string // "" for success
	}{
		{"after a validation", func(st *state) []byte { return encodeState(t, st) }, 2, 4.2, true, ""},
		{"before the first validation", func(st *state) []byte {
			st.BestVal, st.BestStep, st.Stop = math.Inf(1), 0, NewEarlyStop()
			return encodeState(t, st)
		}, 0, math.Inf(1), false, ""},
		{"no training state", func(st *state) []byte { return nil }, 0, 0, false, "no training state"},
		{"inconsistent state", func(st *state) []byte { st.BestStep = 9; return encodeState(t, st) }, 0, 0, false, "best step 9 outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, cfg := validState(t)
			ck := &model.Checkpoint{Weights: model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2))),
				Provenance: model.Provenance{Steps: st.Step}}
			ck.TrainState = tc.state(st)
			step, val, ok, err := RecordedBest(ck)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || step != tc.wantStep || val != tc.wantVal || ok != tc.wantOK {
				t.Fatalf("RecordedBest = %d, %v, %v, %v; want %d, %v, %v", step, val, ok, err, tc.wantStep, tc.wantVal, tc.wantOK)
			}
		})
	}
}

// TestResumeAfterCrash stops a run between the two saves of its first
// validation (the resume checkpoint is written, the best checkpoint is
// not), builds the on-disk states the stop can leave next to other best
// checkpoints, resumes, and checks that the resumed run never replaces a
// better best checkpoint by a worse one: the final best checkpoint's
// validation NLL is at most the best known at the crash (on disk or
// recorded by the resume state; compared exactly, both are the same
// float64 values), and its provenance matches the run's result.
func TestResumeAfterCrash(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:2]
	base := Options{Data: "shipped", Rec: rec, Cells: cells, Config: tinyConfig(model.HeadCat, 2),
		Steps: 4, Batch: 4, LR: 3e-3, ValEvery: 2, ValWindows: 16, Seed: 5, Threads: 2}

	// One crashed run; each case starts from a copy of its resume file.
	crashDir := t.TempDir()
	crashed := base
	crashed.Out, crashed.Log = filepath.Join(crashDir, "m.ckpt"), &bytes.Buffer{}
	crashed.afterResumeSave = func() error { return errCrash }
	if _, err := Run(context.Background(), crashed); !errors.Is(err, errCrash) {
		t.Fatalf("crashed run: err = %v, want the simulated crash", err)
	}
	if _, err := os.Stat(crashed.Out); !os.IsNotExist(err) {
		t.Fatalf("the crash left a best checkpoint (stat: %v)", err)
	}
	resumeBytes, err := os.ReadFile(crashed.Out + ".resume")
	if err != nil {
		t.Fatal(err)
	}
	resumeCk, err := model.LoadCheckpoint(crashed.Out + ".resume")
	if err != nil {
		t.Fatal(err)
	}
	st0, err := decodeState(resumeCk.TrainState, resumeCk.Weights.Config, resumeCk.Provenance.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if st0.Step != 2 || st0.BestStep != 2 || math.IsInf(st0.BestVal, 0) {
		t.Fatalf("resume state at step %d records best %v at step %d; want the first validation's best at step 2", st0.Step, st0.BestVal, st0.BestStep)
	}
	v1 := st0.BestVal

	// bestOnDisk writes a best checkpoint of this model with the given
	// validation NLL and step (the resume weights, perturbed so they are
	// recognisable).
	bestOnDisk := func(val float64, step int) func(t *testing.T, out string) *model.Checkpoint {
		return func(t *testing.T, out string) *model.Checkpoint {
			ck, err := model.LoadCheckpoint(crashed.Out + ".resume")
			if err != nil {
				t.Fatal(err)
			}
			ck.TrainState = nil
			ck.Weights.Tensors["head.bias"][0] += 0.125
			ck.Provenance.ValNLL, ck.Provenance.Steps = val, step
			if err := ck.Save(out); err != nil {
				t.Fatal(err)
			}
			return ck
		}
	}
	tests := []struct {
		name  string
		disk  func(t *testing.T, out string) *model.Checkpoint // best checkpoint on disk; nil for none
		state func(st *state)                                  // changes to the resume state; nil for none
		// keepDisk: the best checkpoint on disk is better than anything
		// the run can reach and must survive unchanged.
		keepDisk bool
	}{
		{"crash before the first best, none on disk", nil, nil, false},
		{"crash between the saves, older worse best on disk", bestOnDisk(v1+1, 0), nil, false},
		{"best on disk better than the resume state records", bestOnDisk(1e-3, 1), func(st *state) { st.BestVal, st.BestStep = 1e9, 0 }, true},
		{"best on disk better, resume weights claim the best", bestOnDisk(1e-3, 1), nil, true},
		{"best of another model on disk", func(t *testing.T, out string) *model.Checkpoint {
			ck, err := model.LoadCheckpoint(crashed.Out + ".resume")
			if err != nil {
				t.Fatal(err)
			}
			ck.TrainState = nil
			ck.CellIDs = []int{ck.CellIDs[1], ck.CellIDs[0]}
			ck.Provenance.ValNLL = 1e-3
			if err := ck.Save(out); err != nil {
				t.Fatal(err)
			}
			return ck
		}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := base
			o.Out = filepath.Join(dir, "m.ckpt")
			var log bytes.Buffer
			o.Log = &log
			o.Resume = o.Out + ".resume"
			if err := os.WriteFile(o.Resume, resumeBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.state != nil {
				setResumeState(t, o.Resume, tc.state)
			}
			// The best known at the crash: the on-disk best of this
			// model, or the resume state's record.
			known := v1
			var disk *model.Checkpoint
			if tc.disk != nil {
				disk = tc.disk(t, o.Out)
				if tc.keepDisk {
					known = math.Min(known, disk.Provenance.ValNLL)
				}
			}
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("resumed run: %v\n%s", err, log.String())
			}
			best, err := model.LoadCheckpoint(o.Out)
			if err != nil {
				t.Fatalf("no best checkpoint after the resumed run: %v\n%s", err, log.String())
			}
			if got := best.Provenance.ValNLL; got > known {
				t.Errorf("best checkpoint has val NLL %v, worse than the %v known at the crash\n%s", got, known, log.String())
			}
			if best.Provenance.ValNLL != res.BestVal || best.Provenance.Steps != res.BestStep {
				t.Errorf("best checkpoint: val %v at step %d; the run reports %v at step %d", best.Provenance.ValNLL, best.Provenance.Steps, res.BestVal, res.BestStep)
			}
			if tc.keepDisk {
				disk.Provenance.TrainedAt, best.Provenance.TrainedAt = "", ""
				if !best.Equal(disk) {
					t.Errorf("the better best checkpoint on disk was replaced\n%s", log.String())
				}
			}
		})
	}
}

// FuzzDecodeState decodes fuzzed training states (seeded with a valid one
// and one corruption of each kind) against the tiny model: decodeState must
// never panic, and a state it accepts must drive the trainer's uses of it
// (an optimiser update, the schedule, early stopping) without panicking.
func FuzzDecodeState(f *testing.F) {
	st, cfg := validState(f)
	f.Add(encodeState(f, st), st.Step)
	mutations := []func(st *state){
		func(st *state) { st.Opt.M["head.weight"] = st.Opt.M["head.weight"][:1] },
		func(st *state) { st.Opt = nil },
		func(st *state) { st.Stop = nil },
		func(st *state) { st.Batch = math.MaxInt },
		func(st *state) { st.Step, st.Opt.Step = -5, -5 },
		func(st *state) { st.History = nil; st.Opt.M = nil; st.Opt.V = nil },
		func(st *state) { st.EMA.Tensors["head.bias"] = nil },
		func(st *state) { st.EMA = nil },
	}
	for _, m := range mutations {
		s, _ := validState(f)
		m(s)
		f.Add(encodeState(f, s), s.Step)
	}
	f.Fuzz(func(t *testing.T, data []byte, steps int) {
		st, err := decodeState(data, cfg, steps)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		w := model.NewWeights(cfg)
		st.Opt.Update(w, func(name string) []float32 { return make([]float32, len(w.Tensors[name])) }, st.LR)
		NewOneCycle(st.LR, st.Steps).Rate(st.Step)
		st.Stop.Observe(1, true)
		if st.EMA != nil {
			st.EMA.Update(w)
		}
	})
}
