package bench

import (
	"bytes"
	"context"
	"maps"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/bench/replay"
	"rgcpred/evaluation"
	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/service"
)

func TestAssign(t *testing.T) {
	pool := []int{4, 9, 2, 7, 5}
	cases := []struct {
		n, devices int
		cells      []int
	}{
		{1, 1, []int{4}},
		{5, 1, []int{4, 9, 2, 7, 5}},
		{6, 2, []int{4, 9, 2}},
		{8, 2, []int{4, 9, 2, 7}},
		{11, 3, []int{4, 9, 2, 7}}, // 3 devices x 4 cells = 12
	}
	for _, c := range cases {
		devs, cells, err := assign(c.n, pool)
		if err != nil {
			t.Fatal(err)
		}
		if len(devs) != c.devices || len(cells) != len(c.cells) {
			t.Fatalf("n %d: %d devices x %v, want %d x %v", c.n, len(devs), cells, c.devices, c.cells)
		}
		for i := range cells {
			if cells[i] != c.cells[i] {
				t.Fatalf("n %d: cells %v, want %v", c.n, cells, c.cells)
			}
		}
		if tot := len(devs) * len(cells); tot < c.n || tot >= c.n+len(devs) {
			t.Fatalf("n %d: %d cells served", c.n, tot)
		}
	}
	if _, _, err := assign(0, pool); err == nil {
		t.Fatal("0 cells accepted")
	}
	if _, _, err := assign(3, nil); err == nil {
		t.Fatal("empty pool accepted")
	}
}

func TestCellPoolQualityFirst(t *testing.T) {
	rec := &rgc.Recording{Cells: []rgc.Cell{{ClusterID: 1}, {ClusterID: 2, Quality: true}, {ClusterID: 3}, {ClusterID: 4, Quality: true}, {ClusterID: 5}}}
	got := cellPool(rec, []int{5, 4, 3, 2}) // the model does not know 1
	want := []int{2, 4, 3, 5}
	if len(got) != len(want) {
		t.Fatalf("pool %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pool %v, want %v", got, want)
		}
	}
}

func TestReportCriterionTableAndPlot(t *testing.T) {
	r := &Report{Points: []Point{
		{Cells: 1, Latency: replay.DurationSummary{N: 10, P50Ms: 0.3, P99Ms: 0.9, P999Ms: 1, MaxMs: 1.2}},
		{Cells: 5, Latency: replay.DurationSummary{N: 10, P50Ms: 0.5, P99Ms: 1.9, P999Ms: 2.5, MaxMs: 3}},
		{Cells: 10, Latency: replay.DurationSummary{N: 10, P50Ms: 0.6, P99Ms: 1.5, P999Ms: 2, MaxMs: 4}, DeadlineMisses: 1},
		{Cells: 20, Latency: replay.DurationSummary{N: 10, P50Ms: 1, P99Ms: 2.1, P999Ms: 3, MaxMs: 5}},
	}}
	r.finish()
	wantRT := []bool{true, true, false, false}
	for i, p := range r.Points {
		if p.RealTime != wantRT[i] {
			t.Errorf("%d cells: real time %v, want %v", p.Cells, p.RealTime, wantRT[i])
		}
	}
	if r.MaxRealTimeCells != 5 {
		t.Fatalf("max real-time cells %d, want 5", r.MaxRealTimeCells)
	}
	var tab bytes.Buffer
	r.WriteTable(&tab)
	if !strings.Contains(tab.String(), "served in real time (p99 <= 2ms, no missed deadline): 5") {
		t.Fatalf("table:\n%s", tab.String())
	}
	path := filepath.Join(t.TempDir(), "r.json")
	other := &Report{ModelInfo: "other model", Points: []Point{{Cells: 1, Latency: replay.DurationSummary{N: 1, P99Ms: 0.5}}}}
	if err := evaluation.WriteJSON(path, other); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(path)
	if err != nil || back.ModelInfo != "other model" || len(back.Points) != 1 || back.Points[0].Latency.P99Ms != 0.5 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	var svg bytes.Buffer
	if err := r.Chart(back).WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg", "p99.9", "2 ms bound", "p99, other model"} {
		if !strings.Contains(svg.String(), s) {
			t.Fatalf("svg lacks %q", s)
		}
	}
}

func TestHistOver(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lat_seconds", Buckets: []float64{0.001, 0.002, 0.004}}, []string{"device"})
	reg.MustRegister(h)
	for _, v := range []float64{0.0005, 0.0015, 0.002, 0.003} {
		h.WithLabelValues("a").Observe(v)
	}
	h.WithLabelValues("b").Observe(0.01)
	for _, tc := range []struct {
		name  string
		bound float64
		want  float64
	}{
		{"lat_seconds", 0.002, 0.4}, // 0.003 and 0.01 of 5
		{"lat_seconds", 0.001, 0.8},
		{"lat_seconds", 0.003, -1}, // no bucket there
		{"other", 0.002, -1},
	} {
		if got := histOver(reg, tc.name, tc.bound); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("histOver(%s, %v) = %v, want %v", tc.name, tc.bound, got, tc.want)
		}
	}
}

// TestRunSmall runs the whole benchmark briefly with a fake model: every
// point has latency samples for every decision, predictions counted by the
// daemon, and a second device once the cells exceed the model's.
func TestRunSmall(t *testing.T) {
	rec, err := rgc.Load("../data/chicken-17-08-21")
	if err != nil {
		t.Fatal(err)
	}
	known := rec.QualityClusterIDs()[:4]
	mdl := &service.Model{Predictor: fakepred.New(known), Cells: known, Name: "fake"}
	rep, err := Run(context.Background(), Options{
		Rec: rec, Model: mdl, ModelPath: "fake", Threads: 1, CellCounts: []int{1, 6}, Seconds: 0.5,
		MaxLag: rgc.Horizon, Log: zerolog.Nop(), Trace: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 2 {
		t.Fatalf("%d points", len(rep.Points))
	}
	for i, want := range []struct{ cells, devices int }{{1, 1}, {6, 2}} {
		p := rep.Points[i]
		if p.Cells != want.cells || p.Devices != want.devices {
			t.Fatalf("point %d: %d cells on %d devices, want %d on %d", i, p.Cells, p.Devices, want.cells, want.devices)
		}
		if p.Predictions == 0 || p.Latency.N != int(p.Decisions) || p.Decisions < int64(p.Predictions)-int64(p.DaemonSkipped)-int64(p.Cells) {
			t.Fatalf("point %d: %d predictions, %d decisions, %d latency samples", i, p.Predictions, p.Decisions, p.Latency.N)
		}
		// Inside the daemon a decision takes no longer than end to end.
		if p.DaemonOverBound < 0 || p.DaemonOverBound > p.OverBound+1e-9 || p.OverBound > 1 {
			t.Fatalf("point %d: %v of the decisions over the bound end to end, %v inside the daemon", i, p.OverBound, p.DaemonOverBound)
		}
		if p.CPU <= 0 || p.MeanBatch < 1 || p.MeanPredictMs <= 0 {
			t.Fatalf("point %d: cpu %v, mean batch %v, mean call %v ms", i, p.CPU, p.MeanBatch, p.MeanPredictMs)
		}
		checkTrace(t, p)
	}
	var csv strings.Builder
	if err := WriteTrace(&csv, rep); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != 1+len(rep.Points[0].Trace)+len(rep.Points[1].Trace) {
		t.Fatalf("trace CSV of %d lines, want a header and %d+%d rows", lines, len(rep.Points[0].Trace), len(rep.Points[1].Trace))
	}
	t.Logf("%+v", rep.Points)
}

// checkTrace: every decision the devices sampled has its parts, from the
// daemon's and the device's records; the parts are in order (none
// negative), add up to the latency the device measured (the slowest one is
// the point's maximum), and come from real model calls but for the
// decisions the daemon skipped (MaxLag, on a loaded machine), which have
// no wait and no call; the tail summarises the slowest 1%.
func checkTrace(t *testing.T, p Point) {
	t.Helper()
	if len(p.Trace) != p.Latency.N || p.TraceUnmatched != 0 {
		t.Fatalf("%d cells: %d trace rows (%d unmatched) for %d sampled decisions", p.Cells, len(p.Trace), p.TraceUnmatched, p.Latency.N)
	}
	var slowest time.Duration
	var skipped int64
	for _, r := range p.Trace {
		if r.Inbound < 0 || r.Wait < 0 || r.Call < 0 || r.Publish < 0 || r.Outbound < 0 || r.Batch < 0 || r.Batch == 0 && r.Wait+r.Call != 0 {
			t.Fatalf("%d cells: decision %+v: a negative part, or a part of a model call without one", p.Cells, r)
		}
		if r.Batch == 0 {
			skipped++
		}
		slowest = max(slowest, r.Total())
	}
	if skipped != p.DaemonSkipped {
		t.Fatalf("%d cells: %d decisions without a model call, the daemon skipped %d", p.Cells, skipped, p.DaemonSkipped)
	}
	if d := math.Abs(float64(slowest)/1e6 - p.Latency.MaxMs); d > 1e-3 {
		t.Fatalf("%d cells: slowest decision in parts %v, the device measured %v ms", p.Cells, slowest, p.Latency.MaxMs)
	}
	calls := 0
	for _, n := range p.Tail.Batches {
		calls += n
	}
	if want := max(1, len(p.Trace)/100); p.Tail.N != want || calls != want {
		t.Fatalf("%d cells: tail of %d decisions (%d by call size), want %d", p.Cells, p.Tail.N, calls, want)
	}
}

// TestTailOf: the tail is the slowest share of the decisions, its parts
// the means over them, counted by the size of their model calls.
func TestTailOf(t *testing.T) {
	ms := time.Millisecond
	rows := []TraceRow{
		{Batch: 1, Inbound: ms, Call: ms},           // 2 ms
		{Batch: 3, Inbound: ms, Call: 3 * ms},       // 4 ms
		{Batch: 1, Wait: ms / 2},                    // 0.5 ms
		{Batch: 2, Call: 2 * ms, Outbound: 4 * ms},  // 6 ms
		{Batch: 2, Publish: ms / 10, Outbound: ms},  // 1.1 ms
		{Batch: 1, Inbound: ms / 10, Call: ms / 10}, // 0.2 ms
	}
	for _, tc := range []struct {
		share         float64
		n             int
		inbound, call float64
		outbound      float64
		batches       map[int]int
	}{
		{0.5, 3, 2.0 / 3, 2, 4.0 / 3, map[int]int{1: 1, 2: 1, 3: 1}},
		{0.01, 1, 0, 2, 4, map[int]int{2: 1}}, // at least one decision
		{1, 6, 2.1 / 6, 6.1 / 6, 5.0 / 6, map[int]int{1: 3, 2: 2, 3: 1}},
	} {
		got := tailOf(rows, tc.share)
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
		if got.N != tc.n || !near(got.InboundMs, tc.inbound) || !near(got.CallMs, tc.call) || !near(got.OutboundMs, tc.outbound) || !maps.Equal(got.Batches, tc.batches) {
			t.Errorf("share %v: %+v, want %d decisions, inbound %v, call %v, outbound %v ms, calls %v", tc.share, got, tc.n, tc.inbound, tc.call, tc.outbound, tc.batches)
		}
	}
	if tailOf(nil, 0.01) != nil {
		t.Error("a tail of no decisions")
	}
}
