package train

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/base/sgemm"
	"rgcpred/model"
	"rgcpred/rgc"
)

func TestParsePrecision(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Precision
		err  bool
	}{
		{"auto", PrecisionAuto, false}, {"fp32", PrecisionFP32, false}, {"bf16", PrecisionBF16, false},
		{"", "", true}, {"fp16", "", true}, {"BF16", "", true},
	} {
		got, err := ParsePrecision(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParsePrecision(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	// bf16 training steps are slower than fp32 even on the AVX512_BF16
	// kernels (docs/training.md), so auto is fp32 on every CPU.
	for _, p := range []Precision{PrecisionAuto, "", PrecisionFP32} {
		if got := p.Resolve(); got != PrecisionFP32 {
			t.Errorf("%q resolves to %s on this CPU (BF16Native %v), want fp32", p, got, sgemm.BF16Native())
		}
	}
	if got := PrecisionBF16.Resolve(); got != PrecisionBF16 {
		t.Errorf("bf16 resolves to %s, want bf16", got)
	}
}

// TestBF16LossTracksFP32 trains a small model for 300 steps three times
// from the same weights on the same batches: in float32, in bf16, and in
// float32 from the weights perturbed by one bf16 rounding's worth
// (each multiplied by 1 + 2^-9 N(0,1)). Training is chaotic, so two
// float32 runs whose weights differ that little drift apart step by step;
// bf16, which rounds every GEMM operand by that much at every step, may
// drift further but must track float32 about as closely: the RMS over the
// steps of the training loss's difference from float32 within 3 times the
// perturbed run's (about 0.025 nats on a loss of about 1.9; and above 1e-4:
// the run did use bf16), the training loss averaged over each 50 steps
// within 0.03 nats of float32's (the mean of 50 such differences, were
// they independent, is about 0.0035: 0.03 leaves room for the drift, and
// an arithmetic error of 2% of the loss fails it), and the best validation
// NLL within the larger of 3 times the perturbed run's difference and 0.01
// nats (about 0.5% of it). The bf16 run records its arithmetic in the
// checkpoints' provenance, and resuming it keeps bf16.
func TestBF16LossTracksFP32(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	cells := rec.QualityCells()[:3]
	cfg := tinyConfig(model.HeadCat, 3)
	const steps = 300
	dir := t.TempDir()
	base := Options{Data: "shipped", Rec: rec, Cells: cells, Config: cfg, Steps: steps, Batch: 8, LR: 3e-3,
		ValEvery: 100, ValWindows: 128, Seed: 5, Threads: 1}

	// The starting weights, as a fresh run would have them, and perturbed.
	w := model.InitWeights(cfg, rand.New(rand.NewPCG(base.Seed, 0x5eed)))
	pooled, _ := ClassFrequencies(rec, rgc.Train, cells)
	initHeadBias(w, pooled)
	wp := w.Clone()
	rng := rand.New(rand.NewPCG(6, 7))
	for _, p := range cfg.Params() {
		if p.Kind == model.KindWeight {
			for i := range wp.Tensors[p.Name] {
				wp.Tensors[p.Name][i] *= float32(1 + 0x1p-9*rng.NormFloat64())
			}
		}
	}
	inits := map[string]string{}
	for name, w := range map[string]*model.Weights{"init": w, "perturbed": wp} {
		inits[name] = filepath.Join(dir, name+".ckpt")
		o := base
		o.Out = inits[name]
		if err := o.check(); err != nil {
			t.Fatal(err)
		}
		if err := o.checkpoint(w, &state{}, 0).Save(inits[name]); err != nil {
			t.Fatal(err)
		}
	}

	type run struct {
		losses []float64
		best   float64
		out    string
		log    string
	}
	train := func(init string, p Precision) run {
		t.Helper()
		var log bytes.Buffer
		o := base
		o.Init, o.Precision, o.Log = inits[init], p, &log
		o.Out = filepath.Join(dir, fmt.Sprintf("%s-%s.ckpt", init, p))
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := model.LoadCheckpoint(o.Out + ".resume")
		if err != nil {
			t.Fatal(err)
		}
		st, err := decodeState(ck.TrainState, ck.Weights.Config, ck.Provenance.Steps)
		if err != nil {
			t.Fatal(err)
		}
		r := run{best: res.BestVal, out: o.Out, log: log.String()}
		for _, pt := range st.History {
			r.losses = append(r.losses, pt.TrainLoss)
		}
		if len(r.losses) != steps {
			t.Fatalf("%s %s: %d steps recorded, want %d", init, p, len(r.losses), steps)
		}
		return r
	}
	f32, b16, f32p := train("init", PrecisionFP32), train("init", PrecisionBF16), train("perturbed", PrecisionFP32)

	rms := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += (a[i] - b[i]) * (a[i] - b[i])
		}
		return math.Sqrt(s / float64(len(a)))
	}
	r16, rp := rms(b16.losses, f32.losses), rms(f32p.losses, f32.losses)
	t.Logf("RMS training-loss difference from float32 over %d steps: bf16 %.4g, float32 on perturbed weights %.4g", steps, r16, rp)
	if !(r16 > 1e-4 && r16 <= 3*rp) {
		t.Errorf("bf16's training loss differs from float32's by %.4g RMS, want in (1e-4, 3 x %.4g]", r16, rp)
	}
	for lo := 0; lo < steps; lo += 50 {
		var m32, m16 float64
		for i := lo; i < lo+50; i++ {
			m32 += f32.losses[i] / 50
			m16 += b16.losses[i] / 50
		}
		t.Logf("steps %d-%d: mean training loss float32 %.4f, bf16 %.4f", lo+1, lo+50, m32, m16)
		if !(math.Abs(m16-m32) <= 0.03) {
			t.Errorf("steps %d-%d: mean training loss %.4f in bf16, %.4f in float32: more than 0.03 nats apart", lo+1, lo+50, m16, m32)
		}
	}
	dv, dvp := math.Abs(b16.best-f32.best), math.Abs(f32p.best-f32.best)
	t.Logf("best val NLL: float32 %.4f, bf16 %.4f, float32 on perturbed weights %.4f", f32.best, b16.best, f32p.best)
	if !(dv <= math.Max(3*dvp, 0.01)) {
		t.Errorf("best val NLL %.4f in bf16, %.4f in float32: |diff| %.4g, want <= max(3 x %.4g, 0.01)", b16.best, f32.best, dv, dvp)
	}

	// The arithmetic is in the log and the provenance.
	path := "emulated"
	if sgemm.BF16Native() {
		path = "native"
	}
	if !strings.Contains(b16.log, "arithmetic: bf16 GEMMs") || !strings.Contains(f32.log, "arithmetic: fp32") {
		t.Errorf("logs do not name the arithmetic:\n%s\n%s", b16.log, f32.log)
	}
	for _, c := range []struct {
		path, precision, how string
	}{{b16.out, "bf16", path}, {b16.out + ".resume", "bf16", path}, {f32.out, "fp32", ""}} {
		ck, err := model.LoadCheckpoint(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Provenance.Precision != c.precision || ck.Provenance.PrecisionPath != c.how {
			t.Errorf("%s: provenance precision %q (%q), want %q (%q)", c.path, ck.Provenance.Precision, ck.Provenance.PrecisionPath, c.precision, c.how)
		}
	}
	// A resumed run keeps bf16, whatever it is asked for.
	var log bytes.Buffer
	o := base
	o.Resume, o.Out, o.Precision, o.Log = b16.out+".resume", b16.out, PrecisionFP32, &log
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "trains in bf16: the resumed run keeps it") || !strings.Contains(log.String(), "arithmetic: bf16 GEMMs") {
		t.Errorf("resumed bf16 run's log:\n%s", log.String())
	}
	ck, err := model.LoadCheckpoint(b16.out + ".resume")
	if err != nil {
		t.Fatal(err)
	}
	if ck.Provenance.Precision != "bf16" {
		t.Errorf("resumed bf16 run saved precision %q", ck.Provenance.Precision)
	}
}
