// Package bench is the latency benchmark of the real-time predictor: it runs
// predictord's core and the replay device in one process over loopback NATS
// (an embedded server), for a rising number of cells, each at real time for
// a stretch of the shipped recording, and reports frame-to-decision latency
// percentiles, predictions per second, deadline misses, late spikes and CPU
// use, and the largest number of cells served in real time. The command is
// bench/cmd/latency.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"rgcpred/base/plot"
	"rgcpred/bench/replay"
)

// Real-time criterion of the benchmark: a cell count is served in
// real time when the 99th percentile of the frame-to-decision latency is at
// most RealTimeP99 and no decision missed its prediction period.
const RealTimeP99 = 2 * time.Millisecond

// EngineCounters is what the inference engine did during one measurement
// (the daemon's predictord_engine_* counters): windows computed, those split
// across its threads, waits for a helper that parked, contention back-offs and
// the calls they ran whole, the windows that carried their first CNN rows
// over from their cell's previous window, and the batches the daemon core
// announced ahead so that the helper threads polled for them (Expects).
type EngineCounters struct {
	Windows       int64 `json:"windows"`
	SplitWindows  int64 `json:"split_windows"`
	Parks         int64 `json:"parks"`
	Backoffs      int64 `json:"backoffs"`
	BackoffCalls  int64 `json:"backoff_calls"`
	ReusedWindows int64 `json:"reused_windows"`
	Expects       int64 `json:"expects"`
}

// splitShare is the share of windows split across the engine's threads.
func (c EngineCounters) splitShare() float64 {
	return c.of(c.SplitWindows)
}

// reuseShare is the share of windows that carried rows over.
func (c EngineCounters) reuseShare() float64 {
	return c.of(c.ReusedWindows)
}

// of is n over the windows computed.
func (c EngineCounters) of(n int64) float64 {
	if c.Windows == 0 {
		return 0
	}
	return float64(n) / float64(c.Windows)
}

// minus returns c - o, counter by counter.
func (c EngineCounters) minus(o EngineCounters) EngineCounters {
	return EngineCounters{c.Windows - o.Windows, c.SplitWindows - o.SplitWindows, c.Parks - o.Parks,
		c.Backoffs - o.Backoffs, c.BackoffCalls - o.BackoffCalls, c.ReusedWindows - o.ReusedWindows, c.Expects - o.Expects}
}

// Point is the measurement at one number of cells.
type Point struct {
	// Cells is the number of cells served; Devices the number of devices
	// they were spread over (cells beyond the checkpoint's count reuse ids on
	// further devices).
	Cells   int `json:"cells"`
	Devices int `json:"devices"`
	// Auth is set when the point ran with message authentication
	// (Options.Auth).
	Auth bool `json:"auth,omitempty"`
	// Engine is what the inference engine did (split windows, parks,
	// back-offs).
	Engine EngineCounters `json:"engine"`
	// Reloads counts the model reloads done while the devices played
	// (Options.ReloadEvery).
	Reloads int `json:"reloads,omitempty"`
	// Trace holds every sampled decision's latency in parts, and Tail the
	// summary of the slowest TailShare of them (Options.Trace; nil
	// without). TraceUnmatched counts the decisions the devices received
	// that the daemon did not report (0 unless something is wrong).
	Trace          []TraceRow `json:"-"`
	Tail           *Tail      `json:"tail,omitempty"`
	TraceUnmatched int        `json:"trace_unmatched,omitempty"`
	// Seconds is the real-time stimulus played (after the 1024-bin history).
	Seconds float64 `json:"seconds"`
	// Latency is the frame-to-decision latency over every decision: from
	// publishing the frame that completed a window to receiving the decision.
	Latency replay.DurationSummary `json:"latency"`
	// OverBound is the share of the decisions whose latency exceeded the
	// real-time bound (RealTimeP99); DaemonOverBound the share whose time
	// inside the daemon did, from a frame message's arrival to the
	// decision's publication (its decision-latency histogram; -1 when the
	// histogram has no bucket at the bound). The difference is the
	// transport's: the device's and the daemon's NATS clients, the server,
	// and the goroutines and threads that carry a message between them.
	OverBound       float64 `json:"over_bound_share"`
	DaemonOverBound float64 `json:"daemon_over_bound_share"`
	// Predictions is the number of windows predicted (from the daemon's
	// counters); PredictionsPerSec per wall-clock second.
	Predictions       uint64  `json:"predictions"`
	PredictionsPerSec float64 `json:"predictions_per_sec"`
	// MeanBatch is the mean number of windows per model call and
	// MeanPredictMs the mean wall time of one call (daemon histograms).
	MeanBatch     float64 `json:"mean_batch"`
	MeanPredictMs float64 `json:"mean_predict_ms"`
	// Decisions is the number of decisions the device received.
	Decisions int64 `json:"decisions"`
	// DeadlineMisses counts the missed deadlines (docs/operations.md): the
	// decisions the daemon skipped (DaemonSkipped: never computed, its
	// MaxLag policy) plus the late ones (DeviceLateDecisions: reached the
	// device after their 80-bin prediction period ended).
	DeadlineMisses      int64 `json:"deadline_misses"`
	DaemonSkipped       int64 `json:"daemon_skipped"`
	DeviceLateDecisions int64 `json:"device_late_decisions"`
	// LateSpikes counts predicted spikes that arrived after their bin was
	// due; Spikes all predicted spikes.
	LateSpikes int64                  `json:"late_spikes"`
	Spikes     int64                  `json:"spikes"`
	Lateness   replay.DurationSummary `json:"lateness"`
	// CPU is the process's CPU time (user + system) over wall time: 1.0 is
	// one core busy. It includes the replay device and the NATS server.
	CPU float64 `json:"cpu"`
	// CPUPerPredictionMs is the process CPU time per predicted window (all
	// of it: model, daemon, NATS, devices), a figure that, unlike the
	// latencies, hardly depends on what else the machine runs.
	CPUPerPredictionMs float64 `json:"cpu_per_prediction_ms"`
	// PaceMaxLagMs is the largest delay of a frame behind its deadline on
	// the device side.
	PaceMaxLagMs float64 `json:"pace_max_lag_ms"`
	// LoadAvg is the machine's 1-minute load average at the end of the
	// point (other processes compete for the 2 cores; 0 if unknown).
	LoadAvg float64 `json:"load_avg_1m"`
	// RealTime reports whether the point meets the real-time criterion.
	RealTime bool `json:"real_time"`
}

// Report is the benchmark's output.
type Report struct {
	// Started is when the run began; Machine describes where it ran.
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	// Model is the checkpoint, Recording the recording and Split its split.
	Model     string `json:"model"`
	ModelInfo string `json:"model_info"`
	Recording string `json:"recording"`
	Split     string `json:"split"`
	// Threads is the engine's thread count; MaxBatch its batch limit;
	// Gather the windows the daemon gathers per call while behind;
	// MaxLag the daemon's overload threshold in bins; GOMAXPROCS the run's.
	Threads    int   `json:"threads"`
	MaxBatch   int   `json:"max_batch"`
	Gather     int   `json:"gather"`
	MaxLag     int64 `json:"max_lag"`
	GOMAXPROCS int   `json:"gomaxprocs"`
	// Stagger is the daemon's start rule (predictord --stagger).
	Stagger bool `json:"stagger"`
	// NoExpect reports that the daemon did not announce each frame's batch
	// to the engine (predictord --expect=false).
	NoExpect bool `json:"no_expect,omitempty"`
	// WholeCalls reports that the daemon published each model call's
	// decisions together when the call ended (predictord --whole-calls).
	WholeCalls bool `json:"whole_calls,omitempty"`
	// FLOPsPerWindow is the model's work per window (model.Config.FLOPs)
	// and PeakGFLOPs the machine's SGEMM rate on one core, measured at the
	// start: FLOPsPerWindow / PeakGFLOPs is the floor of a window's cost.
	FLOPsPerWindow int64   `json:"flops_per_window"`
	PeakGFLOPs     float64 `json:"peak_gflops"`
	// CellPolicy says how cells were chosen.
	CellPolicy string `json:"cell_policy"`
	// CriterionP99Ms is the real-time criterion's latency bound.
	CriterionP99Ms float64 `json:"criterion_p99_ms"`
	// Points holds one measurement per cell count, ascending.
	Points []Point `json:"points"`
	// MaxRealTimeCells is the largest cell count meeting the criterion (0 if
	// none did).
	MaxRealTimeCells int `json:"max_real_time_cells"`
}

// realTime applies the criterion to a point.
func realTime(p Point) bool {
	return p.Latency.N > 0 && p.Latency.P99Ms <= float64(RealTimeP99)/float64(time.Millisecond) && p.DeadlineMisses == 0
}

// finish sets the RealTime flags and MaxRealTimeCells.
func (r *Report) finish() {
	r.MaxRealTimeCells = 0
	for i := range r.Points {
		r.Points[i].RealTime = realTime(r.Points[i])
		if r.Points[i].RealTime && r.Points[i].Cells > r.MaxRealTimeCells {
			r.MaxRealTimeCells = r.Points[i].Cells
		}
	}
}

// Chart returns the plot of latency percentiles against cells (log axes),
// with the real-time bound as a reference line; the p99 of each report in
// compare is added for comparison (e.g. another model).
func (r *Report) Chart(compare ...*Report) *plot.Chart {
	n := len(r.Points)
	x := make([]float64, n)
	p50, p99, p999, mx := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, p := range r.Points {
		x[i] = float64(p.Cells)
		p50[i], p99[i], p999[i], mx[i] = pos(p.Latency.P50Ms), pos(p.Latency.P99Ms), pos(p.Latency.P999Ms), pos(p.Latency.MaxMs)
	}
	bound := []float64{float64(RealTimeP99) / float64(time.Millisecond), float64(RealTimeP99) / float64(time.Millisecond)}
	var bx []float64
	if n > 0 {
		bx = []float64{x[0], x[n-1]}
	} else {
		bound = nil
	}
	c := &plot.Chart{
		Title:  fmt.Sprintf("Frame-to-decision latency, %s, %d threads", r.ModelInfo, r.Threads),
		XLabel: "cells served (real time, 992 Hz)",
		YLabel: "latency (ms)",
		LogX:   true,
		LogY:   true,
		Series: []plot.Series{
			{Name: "p50", X: x, Y: p50},
			{Name: "p99", X: x, Y: p99},
			{Name: "p99.9", X: x, Y: p999},
			{Name: "max", X: x, Y: mx},
			{Name: "2 ms bound", X: bx, Y: bound},
		},
	}
	for _, o := range compare {
		var ox, oy []float64
		for _, p := range o.Points {
			ox = append(ox, float64(p.Cells))
			oy = append(oy, pos(p.Latency.P99Ms))
		}
		c.Series = append(c.Series, plot.Series{Name: "p99, " + o.ModelInfo, X: ox, Y: oy, Points: true})
	}
	return c
}

// pos maps non-positive values (no samples) to NaN so the log axis skips
// them.
func pos(v float64) float64 {
	if v <= 0 {
		return math.NaN()
	}
	return v
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// WriteTable prints the report as a text table.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "model %s (%s), %d engine threads, max batch %d, gather %d, max lag %d bins, stagger %v, expect %v, whole calls %v, GOMAXPROCS %d; %s\n",
		r.Model, r.ModelInfo, r.Threads, r.MaxBatch, r.Gather, r.MaxLag, r.Stagger, !r.NoExpect, r.WholeCalls, r.GOMAXPROCS, r.Machine)
	fmt.Fprintf(w, "%6s %4s %6s %8s %8s %8s %8s %7s %7s %9s %6s %8s %8s %8s %11s %11s %6s %5s %6s %6s %6s %8s %7s %9s %4s\n",
		"cells", "devs", "sec", "p50 ms", "p99 ms", "p99.9 ms", "max ms", ">bound", "daemon", "pred/s", "batch", "call ms", "cpu/pred", "misses", "late/spikes", "late p99 ms", "cpu", "load", "split", "reuse", "parks", "backoffs", "expects", "real time", "auth")
	for _, p := range r.Points {
		fmt.Fprintf(w, "%6d %4d %6.1f %8.3f %8.3f %8.3f %8.3f %6.2f%% %6s %9.0f %6.2f %8.3f %8.3f %8d %11s %11.3f %6.2f %5.1f %6.2f %6.2f %6d %8d %7d %9v %4s\n",
			p.Cells, p.Devices, p.Seconds, p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms, p.Latency.MaxMs, 100*p.OverBound, share(p.DaemonOverBound),
			p.PredictionsPerSec, p.MeanBatch, p.MeanPredictMs, p.CPUPerPredictionMs, p.DeadlineMisses, fmt.Sprintf("%d/%d", p.LateSpikes, p.Spikes), p.Lateness.P99Ms, p.CPU, p.LoadAvg, p.Engine.splitShare(), p.Engine.reuseShare(), p.Engine.Parks, p.Engine.Backoffs, p.Engine.Expects, p.RealTime, onOff(p.Auth))
	}
	for _, p := range r.Points {
		if p.Tail != nil {
			fmt.Fprintf(w, "%d cells, the slowest %.0f%% of the decisions: %v\n", p.Cells, 100*TailShare, p.Tail)
		}
	}
	fmt.Fprintf(w, "largest cell count served in real time (p99 <= %v, no missed deadline): %d\n", RealTimeP99, r.MaxRealTimeCells)
	fmt.Fprintf(w, ">bound: share of decisions later than %v end to end; daemon: share whose time inside the daemon alone (frame message in, decision out) exceeded it\n", RealTimeP99)
	if floor := r.FloorMs(); floor > 0 {
		fmt.Fprintf(w, "cost floor %.3f ms of CPU per window (%.1f MFLOP at %.0f GFLOP/s on one core);", floor, float64(r.FLOPsPerWindow)/1e6, r.PeakGFLOPs)
		for _, p := range r.Points {
			fmt.Fprintf(w, " %d cells %.2fx", p.Cells, p.CPUPerPredictionMs/floor)
		}
		fmt.Fprintln(w, " (process CPU per prediction over the floor: model, daemon, NATS and devices)")
	}
}

// share formats a share as a percentage ("-" when unknown, below 0).
func share(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

// FloorMs is the least CPU time a window can cost, in ms: its FLOPs at the
// machine's peak rate (0 when either is unknown).
func (r *Report) FloorMs() float64 {
	if r.FLOPsPerWindow == 0 || r.PeakGFLOPs == 0 {
		return 0
	}
	return float64(r.FLOPsPerWindow) / r.PeakGFLOPs / 1e6
}

// ReadReport reads a report written as JSON by the latency command.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	return &r, nil
}
