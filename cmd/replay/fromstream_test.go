package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/bench"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/recorder"
	"rgcpred/serve/service"
)

// TestFromStreamAudit: a daemon serving the shipped checkpoint records its
// session (predictord --record); a replay drives it; `replay --from-stream`
// then re-runs the recording and finds every decision equal, and reports
// the differences when the audit's spike policy is not the daemon's.
func TestFromStreamAudit(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	q := rec.QualityClusterIDs()
	ids := []int{q[0], q[5], q[11]}
	for _, prec := range []engine.Precision{engine.FP32, engine.BF16} {
		t.Run(string(prec), func(t *testing.T) { auditSession(t, ids, prec) })
	}
}

// auditSession records a session of a daemon computing in prec (bf16
// forced, so that it runs on any CPU) and audits it with the recorded
// precision, which must pass, and with another spike policy or the other
// precision, which must fail.
func auditSession(t *testing.T, ids []int, prec engine.Precision) {
	url := embedtest.JetStreamServer(t, embednats.Options{}).ClientURL()
	const ckpt = "../../models/gpt-a-cat-cpu.ckpt"
	svc, err := service.New(service.Config{
		Devices: []string{"dev0"}, ModelPath: ckpt, Cells: ids, Stagger: true, PublishSilence: true, MaxLag: 40,
		Load: func(path string, maxBatch int) (*service.Model, error) {
			m, err := bench.LoadEngine(path, maxBatch, 1, engine.FP32)
			if err == nil && prec == engine.BF16 {
				err = m.Predictor.(*engine.Engine).Force(engine.BF16)
			}
			return m, err
		},
		Log: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, svc.ConnOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := svc.EnableJetStream(ctx, nc, service.JetStreamFeatures{Record: recorder.Config{Stream: "REC", MaxAge: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, nc) }()
	for deadline := time.Now().Add(10 * time.Second); !svc.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("daemon not ready after 10 s")
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--data", shipped, "--nats-url", url, "--as-fast-as-possible", "--quiet",
		"--cells", joinInts(ids), "--seconds", "3"}, &stdout, &stderr); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stop()

	audit := func(extra ...string) (string, error) {
		var out, errOut bytes.Buffer
		args := append([]string{"--from-stream", "REC", "--nats-url", url, "--device", "dev0", "--ckpt", ckpt, "--threads", "1"}, extra...)
		err := run(context.Background(), args, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	// The stream stores asynchronously: the audit passes once the last
	// decisions are in.
	var report string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		report, err = audit()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit of the recorded session failed: %v\n%s", err, report)
		}
	}
	t.Log(report)
	if !strings.Contains(report, "decisions") || !strings.Contains(report, "precision "+string(prec)) {
		t.Errorf("audit report %q says nothing of decisions or of the precision %s", report, prec)
	}
	if report, err := audit("--policy", "sample:3"); err == nil {
		t.Errorf("audit with another spike policy passed:\n%s", report)
	}
	// The decisions carry their probabilities, which the two arithmetics
	// round differently: an audit in the other one must fail.
	other := engine.BF16
	if prec == engine.BF16 {
		other = engine.FP32
	}
	if report, err := audit("--precision", string(other)); err == nil {
		t.Errorf("audit of a %s session in %s passed:\n%s", prec, other, report)
	}
}

// TestRecordedArith: the audit takes on a CPU session's arithmetic and
// refuses a GPU session's, naming --precision.
func TestRecordedArith(t *testing.T) {
	cfg, err := model.ParseConfigName("gpt-a-cat-cpu", 1)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.NewFromWeights(model.ParityWeights(cfg, 1), []int{3}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	set := recordedArith(eng)
	for _, tc := range []struct {
		rec     string
		want    engine.Precision
		wantErr string
	}{
		{"bf16", engine.BF16, ""},
		{"fp32", engine.FP32, ""},
		{"cuda tf32", engine.FP32, "--precision"},
		{"cuda fp32", engine.FP32, "--precision"},
		{"fp16", engine.FP32, "unknown precision"},
	} {
		err := set(tc.rec)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q: error %v, want one saying %q", tc.rec, err, tc.wantErr)
		}
		if err == nil && eng.Precision() != tc.want {
			t.Errorf("%q: engine in %s", tc.rec, eng.Precision())
		}
		if err != nil {
			_ = eng.Force(engine.FP32)
		}
	}
}
