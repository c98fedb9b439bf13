package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/rt"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/rollout"
	"rgcpred/serve/embednats"
	"rgcpred/serve/service"
	"rgcpred/stream"
)

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--shard", "2/2"}, {"--shard", "x"}, {"--cells", "1,a"}, {"--threads", "0"},
		{"--nats-user", "u"}, {"--nats-tls-cert", "c.pem"}, {"--nats-creds", "/nonexistent.creds"},
		{"--log-level", "loud"}, {"--log-format", "xml"}, {"extra"}, {"--device", "a.b"},
		{"--model", "/nonexistent/model.ckpt"},
		{"--glm-mix", "g.json", "--glm-weight", "1"}, {"--glm-mix", "g.json", "--glm-weight", "0"},
		{"--glm-mix", "/nonexistent/glm.json"}, {"--ensemble", "/nonexistent/seed2.ckpt"},
		{"--cpus", "0"}, {"--realtime", "--cpus", "x"}, {"--realtime", "--cpus", "-1"}, {"--embedded-addr", "nohost"},
		{"--policy", "loud"}, {"--nats-ping-interval", "0s"},
	} {
		var buf bytes.Buffer
		err := run(context.Background(), args, &buf, nil, nil)
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestRealtimeFlags: --realtime turns the mode on, with --cpus' pinning.
func TestRealtimeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *rt.Settings
	}{
		{nil, nil},
		{[]string{"--realtime"}, &rt.Settings{}},
		{[]string{"--realtime", "--cpus", "1,0"}, &rt.Settings{CPUs: []int{1, 0}}},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if (o.rtMode == nil) != (tc.want == nil) || o.rtMode != nil && !slices.Equal(o.rtMode.CPUs, tc.want.CPUs) {
			t.Errorf("%v: real-time settings %+v, want %+v", tc.args, o.rtMode, tc.want)
		}
	}
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// randomCheckpoint writes a small model with random weights, its output
// head scaled up (x10) so that the prediction depends strongly on the
// window while the int8 path still passes its parity check at load (x30
// and above fail it, and the daemon falls back).
func randomCheckpoint(t *testing.T, ids []int) string {
	cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	w := model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2)))
	for name, ts := range w.Tensors {
		scale := float32(1)
		switch {
		case strings.HasPrefix(name, "head."):
			scale = 10
		}
		for i := range ts {
			ts[i] *= scale
		}
	}
	ck := &model.Checkpoint{Weights: w, CellIDs: ids, BinRateHz: rgc.BinRateHz, WindowBins: rgc.WindowBins, Horizon: rgc.Horizon,
		Provenance: model.Provenance{Data: "random", TrainedAt: "2026-01-01T00:00:00Z"}}
	path := filepath.Join(t.TempDir(), "random.ckpt")
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// nativeDefault is the arithmetic the daemon's default --precision int8
// serves on this CPU with its own kernels: int8 with AVX512_VNNI and
// AVX512_BF16, bf16 with AVX512_BF16 alone, else fp32.
func nativeDefault() engine.Precision {
	switch {
	case engine.Native(engine.INT8):
		return engine.INT8
	case engine.Native(engine.BF16):
		return engine.BF16
	}
	return engine.FP32
}

// servedArithmetic returns the arithmetic named by the model of each JSON
// log line with message msg ("model loaded", "model reloaded"): the first
// word after the provenance, e.g. "int8" of "... trained T), int8 (parity
// with fp32: ...)".
func servedArithmetic(t *testing.T, logs, msg string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Message, Model string }
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != msg {
			continue
		}
		i := strings.Index(l.Model, "trained ")
		j := strings.Index(l.Model[max(i, 0):], "), ")
		if i < 0 || j < 0 {
			t.Fatalf("%s: model %q names no arithmetic after its provenance", msg, l.Model)
		}
		out = append(out, strings.Fields(l.Model[i+j+3:])[0])
	}
	return out
}

// TestDaemonWithEngine runs the command with the CPU engine on a random
// checkpoint against an embedded NATS server, in fp32 and in the default
// arithmetic (--precision int8: what this CPU serves with its own kernels,
// and int8 on the portable kernels where it has no int8 instructions). The
// arithmetic that served, read from the load and reload logs, is the one
// expected, and the daemon's spikes equal the offline rollout's in that
// arithmetic (engine.Force) exactly: the engine's outputs do not depend on
// the batch or the threads in any arithmetic. An int8 daemon's spike count
// is within 10% of the fp32 rollout's, whose trains it does not follow
// spike for spike (a moved spike moves the later windows). SIGHUP reloads;
// cancelling (SIGTERM) drains and returns nil.
func TestDaemonWithEngine(t *testing.T) {
	full, err := rgc.Load("../../data/chicken-17-08-21")
	if err != nil {
		t.Fatal(err)
	}
	const bins = 25000
	rec := &rgc.Recording{Name: full.Name, SampleRateHz: full.SampleRateHz, Bins: bins}
	for c := range rec.Stimulus {
		rec.Stimulus[c] = full.Stimulus[c][:bins]
	}
	rec.Cells = full.Cells
	idx := rec.QualityCells()[:4]
	var ids []int
	for _, c := range idx {
		ids = append(ids, rec.Cells[c].ClusterID)
	}
	path := randomCheckpoint(t, ids)
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name     string
		flags    []string
		portable bool // engine.UsePortable: int8 on the portable kernels
		want     engine.Precision
		stagger  bool
	}
	cases := []tc{
		{"fp32, staggered", []string{"--precision", "fp32"}, false, engine.FP32, true},
		{"fp32, simultaneous", []string{"--precision", "fp32"}, false, engine.FP32, false},
		{"default, this CPU's kernels", nil, false, nativeDefault(), true},
	}
	if nativeDefault() != engine.INT8 {
		cases = append(cases, tc{"default, portable int8 kernels", nil, true, engine.INT8, true})
	}
	var fp32Spikes int
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.portable {
				engine.UsePortable(true)
				defer engine.UsePortable(false)
			}
			eng, err := engine.New(ck, len(ids), 1)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			if err := eng.Force(c.want); err != nil {
				t.Fatal(err)
			}
			n := testDaemonWithEngine(t, rec, idx, ids, path, eng, c.stagger, c.flags, c.want)
			switch {
			case c.want == engine.FP32 && c.stagger:
				fp32Spikes = n
			case c.want != engine.FP32 && fp32Spikes > 0 && math.Abs(float64(n-fp32Spikes)) > 0.1*float64(fp32Spikes):
				t.Errorf("%s daemon: %d spikes, the fp32 rollout %d: more than 10%% apart", c.want, n, fp32Spikes)
			}
		})
	}
}

// testDaemonWithEngine runs the daemon with flags and checks that it served
// in arith and gave the spikes of the offline rollout with eng; it returns
// their number.
func testDaemonWithEngine(t *testing.T, rec *rgc.Recording, idx, ids []int, path string, eng rgc.Predictor, stagger bool, flags []string, arith engine.Precision) int {
	off, err := rollout.Run(context.Background(), rec, eng, rollout.Options{Split: rgc.Test, Cells: idx, Stagger: stagger})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]int64{}
	nWant := 0
	for i, tr := range off.Trains {
		for j, v := range tr.Generated {
			if v == 1 && off.From+j > tr.Start { // before Start: the recorded history
				want[ids[i]] = append(want[ids[i]], int64(off.From+j))
				nWant++
			}
		}
	}
	gaps := map[int64]bool{}
	for _, bins := range want {
		for i := 1; i < len(bins); i++ {
			gaps[bins[i]-bins[i-1]] = true
		}
	}
	if nWant < 20 || len(gaps) < 5 {
		t.Fatalf("%d offline spikes with %d distinct intervals: the model ignores its input, test too weak", nWant, len(gaps))
	}

	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	logs := &syncBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		args := []string{"--nats-url", srv.ClientURL(), "--model", path, "--threads", "1", "--metrics-addr", "127.0.0.1:0", "--max-lag", "0", "--log-format", "json", fmt.Sprintf("--stagger=%v", stagger)}
		done <- run(ctx, append(args, flags...), logs, hup, nil)
	}()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, _ := stream.NewPublisher(nc, "dev0")
	for {
		if _, err := p.Status(context.Background()); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("daemon ended: %v\n%s", err, logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := servedArithmetic(t, logs.String(), "model loaded"); len(got) != 1 || got[0] != string(arith) {
		t.Fatalf("model loaded in %v, want %s\n%s", got, arith, logs)
	}
	col, err := p.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	lo, hi := rec.SplitRange(rgc.Test)
	var hs []stream.History
	for i, c := range idx {
		t0 := off.Trains[i].Start // the cell's first window
		h := stream.History{Cell: int32(rec.Cells[c].ClusterID)}
		for _, b := range rec.Cells[c].SpikeBins {
			if int(b) > t0-rgc.WindowBins && int(b) <= t0 {
				h.Spikes[int(b)-(t0-rgc.WindowBins+1)] = true
			}
		}
		hs = append(hs, h)
	}
	if err := p.SendHistory(hs); err != nil {
		t.Fatal(err)
	}
	for b := lo; b < hi; b += 100 {
		f := &stream.Frames{FirstSeq: int64(b)}
		for x := b; x < min(b+100, hi); x++ {
			var fr stream.Frame
			for c := range fr.LED {
				fr.LED[c] = rec.Stimulus[c][x]
			}
			f.Frames = append(f.Frames, fr)
		}
		if err := p.PublishFrames(f); err != nil {
			t.Fatal(err)
		}
		if b == lo+2000 {
			hup <- syscall.SIGHUP // reload the same checkpoint mid-stream
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	count := func(ds []stream.Decision) int {
		n := 0
		for _, d := range ds {
			if d.Kind == stream.KindSpike && d.Bin < int64(hi) {
				n++
			}
		}
		return n
	}
	if err := col.WaitFor(wctx, func(ds []stream.Decision) bool { return count(ds) >= nWant }); err != nil {
		t.Fatalf("%v: %d of %d spikes\n%s", err, count(col.Decisions()), nWant, logs)
	}
	time.Sleep(50 * time.Millisecond)
	got := map[int][]int64{}
	for _, d := range col.Decisions() {
		if d.Kind == stream.KindSpike && d.Bin < int64(hi) {
			got[int(d.Cell)] = append(got[int(d.Cell)], d.Bin)
		}
	}
	for _, id := range ids {
		if !slices.Equal(got[id], want[id]) {
			t.Fatalf("cell %d: daemon spikes differ from the offline rollout with the engine\n got %v\nwant %v", id, got[id], want[id])
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not drain within 20 s")
	}
	out := logs.String()
	for _, msg := range []string{`"model loaded"`, `"model reloaded"`, `"draining"`, `"stopped"`, `"serving /metrics`} {
		if !strings.Contains(out, msg) {
			t.Errorf("log lacks %s:\n%s", msg, out)
		}
	}
	for _, msg := range []string{"model loaded", "model reloaded"} {
		if got := servedArithmetic(t, out, msg); len(got) != 1 || got[0] != string(arith) {
			t.Errorf("%s: served in %v, want %s", msg, got, arith)
		}
	}
	t.Logf("%s: %d spikes of %d cells (%d distinct intervals) equal to the offline engine rollout", arith, nWant, len(ids), len(gaps))
	return nWant
}

func fakeLoader(ids []int) service.Loader {
	return func(string, int) (*service.Model, error) {
		return &service.Model{Predictor: fakepred.New(ids), Cells: ids, Name: "fake"}, nil
	}
}
