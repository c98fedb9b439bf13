package main

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/serve/modelload"
)

// writeCheckpoint writes a small random checkpoint of cells ids with the
// given bin rate to path.
func writeCheckpoint(t *testing.T, ids []int, rate float64, path string) {
	t.Helper()
	cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	ck := &model.Checkpoint{Weights: model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2))), CellIDs: ids, BinRateHz: rate,
		WindowBins: rgc.WindowBins, Horizon: rgc.Horizon, Provenance: model.Provenance{Data: "random", TrainedAt: "2026-01-01T00:00:00Z"}}
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointBinRate: a checkpoint trained at another bin rate than the
// stream's is refused at start, and on reload (the old model stays).
func TestCheckpointBinRate(t *testing.T) {
	ids := []int{3, 5}
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "1khz.ckpt"), filepath.Join(dir, "model.ckpt")
	writeCheckpoint(t, ids, 1000, bad)
	writeCheckpoint(t, ids, rgc.BinRateHz, good)
	srv := startServer(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})

	d := startDaemon(t, []string{"--nats-url", srv.ClientURL(), "--model", bad}, modelload.Engine(1, engine.FP32))
	err := d.wait(t, 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "bin rate 1000.000000 Hz differs from the stream's 991.820436 Hz") {
		t.Fatalf("run with a 1 kHz checkpoint: %v", err)
	}

	d = startDaemon(t, []string{"--nats-url", srv.ClientURL(), "--model", good}, modelload.Engine(1, engine.FP32))
	d.waitLog(t, "serving")
	b, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.sigs <- syscall.SIGHUP
	line := d.waitLog(t, "reload failed")
	if e, _ := line["error"].(string); !strings.Contains(e, "bin rate 1000.000000 Hz differs") {
		t.Fatalf("reload error %q", e)
	}
	d.cancel()
	if err := d.wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestBadModelFiles: a file that is not a checkpoint, or not a GLM, is
// refused at start with an error that names the file once and says what
// is wrong.
func TestBadModelFiles(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(notes, []byte("# notes on the recording, neither a checkpoint nor a GLM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", notes}, "load model: load checkpoint " + notes + ": checkpoint: bad magic"},
		{[]string{"--model", "../../" + DefaultModel, "--glm-mix", notes}, "load glm " + notes + ": not a GLM file"},
	} {
		args := append([]string{"--embedded-addr", "127.0.0.1:0", "--metrics-addr", ""}, c.args...)
		err := run(t.Context(), args, io.Discard, nil, modelload.Engine(1, engine.FP32))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), notes) != 1 {
			t.Errorf("%v: error %v, want it to contain %q and name the file once", c.args, err, c.want)
		}
	}
}
