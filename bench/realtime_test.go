package bench

import (
	"bytes"
	"strings"
	"testing"

	"rgcpred/bench/replay"
)

// TestRTReportTable: a row within the goal reads "met"; a row over it, or
// with a missed decision, reads "MISS" and gets the parts of its slowest
// decisions; the floor, the fallback and the job's cores are printed.
func TestRTReportTable(t *testing.T) {
	tail := &Tail{N: 3, InboundMs: 0.1, WaitMs: 2.5, CallMs: 0.4, PublishMs: 0.01, OutboundMs: 0.2, Batches: map[int]int{2: 3}}
	pt := func(p99 float64, misses int64) Point {
		return Point{Cells: 60, Latency: replay.DurationSummary{P50Ms: 0.4, P99Ms: p99}, DeadlineMisses: misses, Tail: tail}
	}
	rep := &RTReport{Model: "m", Applied: "memory locked", Fallback: "rt: SCHED_FIFO priority 20: operation not permitted", GoalP99: 1,
		Rows: []RTRow{
			{Beside: "quiet", Mode: "off", Floor: replay.DurationSummary{N: 5000, P99Ms: 0.15}, FloorFIFO: true, Points: []Point{pt(2.4, 0)}},
			{Beside: "quiet", Mode: "on", Floor: replay.DurationSummary{N: 5000, P99Ms: 0.15}, FloorFIFO: true, Points: []Point{pt(0.9, 0)}},
			{Beside: "job", Mode: "on", Floor: replay.DurationSummary{N: 5000, P99Ms: 4}, Points: []Point{pt(0.8, 2)}, BesideCores: 0.25},
		}}
	var b bytes.Buffer
	rep.WriteTable(&b)
	out := b.String()
	for _, want := range []string{
		"NOT applied: rt: SCHED_FIFO priority 20",
		"(host wake-up floor: 5000 sleeps of 1ms, SCHED_FIFO)",
		"(host wake-up floor: 5000 sleeps of 1ms, normal priority)",
		"quiet, mode off, 60 cells, goal missed; the slowest 1% of the decisions: inbound 0.100, wait 2.500",
		"job, mode on, 60 cells, goal missed",
		"  0.25 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "quiet, mode on, 60 cells, goal missed") {
		t.Errorf("a row within the goal reported as missed:\n%s", out)
	}
	for i, want := range []string{"MISS", "met", "MISS"} {
		if got := rep.verdict(rep.Rows[i].Points[0]); got != want {
			t.Errorf("row %d: verdict %s, want %s", i, got, want)
		}
	}
}
