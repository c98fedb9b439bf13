package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/model"
	"rgcpred/rgc"
)

// TestEMARate checks the warm-up decay min(Decay, (1+t)/(10+t)).
func TestEMARate(t *testing.T) {
	for _, tc := range []struct {
		decay float64
		t     int
		want  float64
	}{
		{0.999, 0, 0.1},
		{0.999, 1, 2.0 / 11},
		{0.999, 1000, 1001.0 / 1010},
		{0.999, 8991, 0.999}, // (1+t)/(10+t) = 0.999 exactly here
		{0.999, 100000, 0.999},
		{0.5, 7, 8.0 / 17},
		{0.5, 8, 0.5},
		{0.5, 9, 0.5},
	} {
		e := &EMA{Decay: tc.decay}
		if got := e.Rate(tc.t); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("decay %v, update %d: rate %v, want %v", tc.decay, tc.t, got, tc.want)
		}
	}
}

// TestEMAUpdate checks the average against sequences computed by hand:
// every tensor of the weights (trainable and batch-norm statistics) is set
// to the value x_t before update t and must hold the hand-computed average
// after it. Tolerance: 1e-6 absolute on values of at most 2 (float32
// rounding, about 1e-7 an update, over at most 10 updates).
func TestEMAUpdate(t *testing.T) {
	// p8 is the product of the first 8 warm-up decays, 8! 9! / 17!.
	const p8 = 40320.0 * 362880 / 355687428096000
	for _, tc := range []struct {
		name  string
		decay float64
		init  float32
		xs    []float32 // the weights' value at each update
		want  []float64 // the average after each update
	}{
		{"warm-up towards a constant", 0.999, 0, []float32{1, 1, 1},
			[]float64{0.9, 10.8 / 11, 0.25*10.8/11 + 0.75}},
		{"moving weights", 0.999, 1, []float32{0, 2},
			[]float64{0.1, 0.1*2.0/11 + 2*9.0/11}},
		{"initial weights fade, then the cap", 0.5, 2, []float32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			[]float64{0.2, 0.2 * 2 / 11, 0.2 * 2 / 11 / 4, 0.2 * 2 / 11 / 4 * 4 / 13, 0.2 * 2 / 11 / 4 * 4 / 13 * 5 / 14,
				0.2 * 2 / 11 / 4 * 4 / 13 * 5 / 14 * 0.4, 0.2 * 2 / 11 / 4 * 4 / 13 * 5 / 14 * 0.4 * 7 / 16,
				2 * p8, 2 * p8 * 0.5, 2 * p8 * 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tinyConfig(model.HeadCat, 2)
			w := model.NewWeights(c)
			fill := func(v float32) {
				for _, x := range w.Tensors {
					for i := range x {
						x[i] = v
					}
				}
			}
			fill(tc.init)
			e := NewEMA(w, tc.decay)
			for k, x := range tc.xs {
				fill(x)
				e.Update(w)
				for _, p := range c.Params() {
					for i, v := range e.Tensors[p.Name] {
						if math.Abs(float64(v)-tc.want[k]) > 1e-6 {
							t.Fatalf("update %d: %s[%d] (%s) = %v, want %v", k, p.Name, i, p.Kind, v, tc.want[k])
						}
					}
				}
			}
			if e.Step != len(tc.xs) {
				t.Errorf("%d updates counted, want %d", e.Step, len(tc.xs))
			}
		})
	}
}

// emaSnapshot is the resume checkpoint of one validation: its raw weights
// and weight average.
type emaSnapshot struct {
	raw, avg *model.Weights
	decay    float64
}

// readResume loads the resume checkpoint at path and decodes its training
// state.
func readResume(t *testing.T, path string) (*model.Checkpoint, *state) {
	t.Helper()
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(ck.TrainState, ck.Weights.Config, ck.Provenance.Steps)
	if err != nil {
		t.Fatal(err)
	}
	return ck, st
}

// snapshotResume returns an afterResumeSave hook that records the resume
// checkpoint at out+".resume" by step in snaps, and fails with errCrash at
// the validation of step crashAt (never when 0).
func snapshotResume(t *testing.T, out string, snaps map[int]emaSnapshot, crashAt int) func() error {
	return func() error {
		ck, st := readResume(t, out+".resume")
		if st.EMA == nil {
			return errors.New("resume state without a weight average")
		}
		if ck.Provenance.EMA != st.EMA.Decay {
			t.Errorf("resume checkpoint at step %d: provenance EMA %v, state's decay %v", st.Step, ck.Provenance.EMA, st.EMA.Decay)
		}
		snaps[st.Step] = emaSnapshot{raw: ck.Weights, avg: st.EMA.Weights(ck.Weights.Config), decay: st.EMA.Decay}
		if st.Step == crashAt {
			return errCrash
		}
		return nil
	}
}

// checkEMAStep checks that the average at step k+1 is one update of the
// average at step k towards the raw weights at step k+1, for every tensor:
// the run updates it once a step, from the master weights (with two
// replicas, their averaged statistics). Tolerance: 1e-6 relative (float32
// rounding of the test's own arithmetic).
func checkEMAStep(t *testing.T, cfg model.Config, k int, prev, next emaSnapshot) {
	t.Helper()
	d := (&EMA{Decay: prev.decay}).Rate(k)
	for _, p := range cfg.Params() {
		for i, v := range next.avg.Tensors[p.Name] {
			want := d*float64(prev.avg.Tensors[p.Name][i]) + (1-d)*float64(next.raw.Tensors[p.Name][i])
			if math.Abs(float64(v)-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Fatalf("step %d: average of %s[%d] = %v, want %v (d %v, previous %v, weight %v)",
					k+1, p.Name, i, v, want, d, prev.avg.Tensors[p.Name][i], next.raw.Tensors[p.Name][i])
			}
		}
	}
}

// emaOptions is a short run of the tiny model with a weight average of
// decay 0.9, validating every step, on two replicas (two threads, batch 4).
func emaOptions(t *testing.T, rec *rgc.Recording, out string) Options {
	return Options{Data: "shipped", Rec: rec, Cells: rec.QualityCells()[:2], Config: tinyConfig(model.HeadCat, 2),
		Steps: 6, Batch: 4, LR: 3e-3, ValEvery: 1, ValWindows: 16, Seed: 4, Threads: 2, EMA: 0.9,
		Out: out, Log: &bytes.Buffer{}}
}

// TestRunEMA trains with a weight average and checks that the average
// moves once per step by its formula, and that the best checkpoint holds
// the average at its step (bit for bit), not the raw weights, with the
// decay in its provenance.
func TestRunEMA(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	o := emaOptions(t, rec, filepath.Join(t.TempDir(), "m.ckpt"))
	snaps := map[int]emaSnapshot{}
	o.afterResumeSave = snapshotResume(t, o.Out, snaps, 0)
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != o.Steps {
		t.Fatalf("%d validations recorded, want %d", len(snaps), o.Steps)
	}
	if log := o.Log.(*bytes.Buffer).String(); !strings.Contains(log, "data parallel: 2 replicas") {
		t.Errorf("the run did not train on 2 replicas:\n%s", log)
	}
	for k := 1; k < o.Steps; k++ {
		checkEMAStep(t, o.Config, k, snaps[k], snaps[k+1])
	}
	best, err := model.LoadCheckpoint(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := snaps[best.Provenance.Steps]
	switch {
	case !ok || best.Provenance.Steps != res.BestStep:
		t.Fatalf("best checkpoint at step %d, run's best at %d", best.Provenance.Steps, res.BestStep)
	case !best.Weights.Equal(s.avg):
		t.Errorf("best checkpoint (step %d) does not hold the weight average of its step", best.Provenance.Steps)
	case best.Weights.Equal(s.raw):
		t.Errorf("best checkpoint (step %d) holds the raw weights", best.Provenance.Steps)
	case best.Provenance.EMA != 0.9:
		t.Errorf("best checkpoint's provenance records EMA %v, want 0.9", best.Provenance.EMA)
	}
}

// TestResumeEMA checks resuming a run that averages the weights: the
// average and its update count come back bit for bit and the run goes on
// updating it; a resume that asks for another decay, or for an average of
// a run without one, is refused and changes no file.
func TestResumeEMA(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	// A run that stops after step 3's resume checkpoint; one without an
	// average, stopped there too.
	dir := t.TempDir()
	crashed := emaOptions(t, rec, filepath.Join(dir, "ema.ckpt"))
	first := map[int]emaSnapshot{}
	crashed.afterResumeSave = snapshotResume(t, crashed.Out, first, 3)
	if _, err := Run(context.Background(), crashed); !errors.Is(err, errCrash) {
		t.Fatalf("crashed run: err = %v, want the simulated crash", err)
	}
	plain := emaOptions(t, rec, filepath.Join(dir, "plain.ckpt"))
	plain.EMA, plain.Steps = 0, 2
	if _, err := Run(context.Background(), plain); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		from   string  // the resume checkpoint's run
		ema    float64 // Options.EMA of the resumed run
		errMsg string  // "" for success
		// bestAtCrash makes the resume state record the crash's step as
		// an unbeatable best, never saved: the resumed run must write the
		// average of that step as the best checkpoint.
		bestAtCrash bool
	}{
		{"the run's decay taken", crashed.Out, 0, "", false},
		{"the run's decay given", crashed.Out, 0.9, "", false},
		{"crash between the saves of the best", crashed.Out, 0, "", true},
		{"another decay", crashed.Out, 0.99, "averages the weights with decay 0.9, not 0.99", false},
		{"an average of a run without one", plain.Out, 0.9, "trained without a weight average", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.ckpt")
			data, err := os.ReadFile(tc.from + ".resume")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(out+".resume", data, 0o644); err != nil {
				t.Fatal(err)
			}
			o := emaOptions(t, rec, out)
			o.Resume, o.EMA = out+".resume", tc.ema
			if tc.bestAtCrash {
				setResumeState(t, o.Resume, func(st *state) { st.BestVal, st.BestStep = 1e-9, st.Step })
			}
			snaps := map[int]emaSnapshot{}
			o.afterResumeSave = snapshotResume(t, out, snaps, 0)
			_, err = Run(context.Background(), o)
			if tc.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errMsg)
				}
				after, rerr := os.ReadFile(o.Resume)
				if rerr != nil || !bytes.Equal(after, data) {
					t.Errorf("the refused resume changed its resume checkpoint (read: %v)", rerr)
				}
				if _, serr := os.Stat(out); !os.IsNotExist(serr) {
					t.Errorf("the refused resume wrote a best checkpoint (stat: %v)", serr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The crash file's average at step 3, as the resumed run read
			// it, is the one step 4 started from.
			if len(snaps) != o.Steps-3 {
				t.Fatalf("%d validations after the resume, want %d", len(snaps), o.Steps-3)
			}
			for k := 3; k < o.Steps; k++ {
				prev := first[3]
				if k > 3 {
					prev = snaps[k]
				}
				checkEMAStep(t, o.Config, k, prev, snaps[k+1])
			}
			if tc.bestAtCrash {
				best, err := model.LoadCheckpoint(out)
				if err != nil {
					t.Fatal(err)
				}
				if best.Provenance.Steps != 3 || !best.Weights.Equal(first[3].avg) {
					t.Errorf("best checkpoint at step %d; want the average of step 3 (the same: %v)",
						best.Provenance.Steps, best.Weights.Equal(first[3].avg))
				}
			}
			// A finished run resumed: nothing to do but save again; the
			// average comes back bit for bit.
			final, st0 := readResume(t, o.Resume)
			again := o
			again.afterResumeSave, again.EMA = nil, 0
			if _, err := Run(context.Background(), again); err != nil {
				t.Fatal(err)
			}
			ck, st1 := readResume(t, o.Resume)
			a0, a1 := st0.EMA.Weights(final.Weights.Config), st1.EMA.Weights(ck.Weights.Config)
			if st1.EMA.Step != st0.EMA.Step || st1.EMA.Decay != st0.EMA.Decay || !a1.Equal(a0) {
				t.Errorf("average after a resume round trip: %d updates of decay %v, %d before of %v; same tensors %v",
					st1.EMA.Step, st1.EMA.Decay, st0.EMA.Step, st0.EMA.Decay, a1.Equal(a0))
			}
			if ck.Provenance.EMA != 0.9 {
				t.Errorf("resumed run's checkpoint records EMA %v, want the run's 0.9", ck.Provenance.EMA)
			}
		})
	}
}

// BenchmarkEMAUpdate times one update of the weight average of the shipped
// configuration (gpt-a-cat-cpu, 60 cells), the cost --ema adds to a step.
func BenchmarkEMAUpdate(b *testing.B) {
	c, err := model.ParseConfigName("gpt-a-cat-cpu", 60)
	if err != nil {
		b.Fatal(err)
	}
	w := model.InitWeights(c, rand.New(rand.NewPCG(1, 1)))
	e := NewEMA(w, 0.999)
	b.SetBytes(int64(4 * c.CountParams("")))
	for b.Loop() {
		e.Update(w)
	}
}
