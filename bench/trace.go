package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"rgcpred/serve/service"
)

// TraceRow is one decision's frame-to-decision latency in its parts
// (Options.Trace), which add up to the latency the device measured.
type TraceRow struct {
	// Device, Cell and End identify the decision; Batch is the number of
	// windows of the model call that computed it (0: decided without one).
	Device string
	Cell   int32
	End    int64
	Batch  int
	// Inbound is from the device publishing the frame at End to the
	// daemon receiving the frames message whose processing decided it;
	// Wait from there to the start of the model call (calls ahead of it,
	// windows gathered); Call the model call until the decision's window
	// was handed over (the whole call with --whole-calls); Publish from
	// there to the decision handed to NATS; Outbound from there to the
	// device receiving it.
	Inbound, Wait, Call, Publish, Outbound time.Duration
}

// Total is the decision's frame-to-decision latency.
func (r TraceRow) Total() time.Duration {
	return r.Inbound + r.Wait + r.Call + r.Publish + r.Outbound
}

// Tail summarises the slowest decisions of a point (Options.Trace): how
// many, the mean of each part of their latency in milliseconds, and how
// many came from model calls of each size (windows -> decisions).
type Tail struct {
	N          int         `json:"n"`
	InboundMs  float64     `json:"inbound_ms"`
	WaitMs     float64     `json:"wait_ms"`
	CallMs     float64     `json:"call_ms"`
	PublishMs  float64     `json:"publish_ms"`
	OutboundMs float64     `json:"outbound_ms"`
	Batches    map[int]int `json:"batches"`
}

// TailShare is the share of a point's decisions that Tail summarises: the
// slowest 1%, those at or past the p99.
const TailShare = 0.01

// tailOf summarises the slowest share of rows (at least one row, when
// there are rows).
func tailOf(rows []TraceRow, share float64) *Tail {
	if len(rows) == 0 {
		return nil
	}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b TraceRow) int { return int(b.Total() - a.Total()) })
	n := max(1, int(share*float64(len(rows))))
	t := &Tail{N: n, Batches: map[int]int{}}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
	for _, r := range sorted[:n] {
		t.InboundMs += ms(r.Inbound)
		t.WaitMs += ms(r.Wait)
		t.CallMs += ms(r.Call)
		t.PublishMs += ms(r.Publish)
		t.OutboundMs += ms(r.Outbound)
		t.Batches[r.Batch]++
	}
	return t
}

// String formats the tail for the table.
func (t *Tail) String() string {
	sizes := make([]int, 0, len(t.Batches))
	for b := range t.Batches {
		sizes = append(sizes, b)
	}
	slices.Sort(sizes)
	calls := ""
	for i, b := range sizes {
		if i > 0 {
			calls += ", "
		}
		calls += fmt.Sprintf("%d windows: %d", b, t.Batches[b])
	}
	return fmt.Sprintf("inbound %.3f, wait %.3f, call %.3f, publish %.3f, outbound %.3f ms (means of %d); from calls of %s",
		t.InboundMs, t.WaitMs, t.CallMs, t.PublishMs, t.OutboundMs, t.N, calls)
}

// traceKey identifies a decision across the daemon's and a device's
// records.
type traceKey struct {
	device string
	cell   int32
	end    int64
}

// deviceRecord is a device's half of a decision's record.
type deviceRecord struct {
	key            traceKey
	sent, received time.Time
}

// tracer collects the daemon's and the devices' halves of every decision's
// record during a point and joins them afterwards: a decision can reach the
// device before the daemon has reported it. Both halves append to slices
// sized for the point, so that recording allocates nothing while the
// devices play (bar an underestimate).
type tracer struct {
	dmu    sync.Mutex
	daemon []service.DecisionTiming
	vmu    sync.Mutex
	device []deviceRecord
}

// newTracer returns a tracer with room for about n decisions.
func newTracer(n int) *tracer {
	return &tracer{daemon: make([]service.DecisionTiming, 0, n), device: make([]deviceRecord, 0, n)}
}

// timing records the daemon's half (service.Config.Timing).
func (t *tracer) timing(dt service.DecisionTiming) {
	t.dmu.Lock()
	t.daemon = append(t.daemon, dt)
	t.dmu.Unlock()
}

// onDecision returns the recorder of device dev's half
// (replay.Config.OnDecision).
func (t *tracer) onDecision(dev string) func(cell int32, end int64, sent, received time.Time) {
	return func(cell int32, end int64, sent, received time.Time) {
		t.vmu.Lock()
		t.device = append(t.device, deviceRecord{traceKey{dev, cell, end}, sent, received})
		t.vmu.Unlock()
	}
}

// rows joins the halves: one row per decision both sides recorded, in the
// devices' order. It returns the number of device records without a
// daemon record.
func (t *tracer) rows() (rows []TraceRow, unmatched int) {
	t.dmu.Lock()
	t.vmu.Lock()
	defer t.dmu.Unlock()
	defer t.vmu.Unlock()
	byKey := make(map[traceKey]service.DecisionTiming, len(t.daemon))
	for _, d := range t.daemon {
		byKey[traceKey{d.Device, d.Cell, d.End}] = d
	}
	rows = make([]TraceRow, 0, len(t.device))
	for _, v := range t.device {
		d, ok := byKey[v.key]
		if !ok {
			unmatched++
			continue
		}
		rows = append(rows, TraceRow{
			Device: v.key.device, Cell: v.key.cell, End: v.key.end, Batch: d.Batch,
			Inbound: d.Arrived.Sub(v.sent), Wait: d.CallStart.Sub(d.Arrived), Call: d.CallEnd.Sub(d.CallStart),
			Publish: d.Published.Sub(d.CallEnd), Outbound: v.received.Sub(d.Published),
		})
	}
	return rows, unmatched
}

// WriteTrace writes the rows of every point of r as CSV: the point's cell
// count, the decision, its model call's windows and the parts of its
// latency in microseconds.
func WriteTrace(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"cells", "device", "cell", "end", "batch", "inbound_us", "wait_us", "call_us", "publish_us", "outbound_us", "total_us"}); err != nil {
		return err
	}
	us := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
	}
	for _, p := range r.Points {
		for _, x := range p.Trace {
			rec := []string{strconv.Itoa(p.Cells), x.Device, strconv.Itoa(int(x.Cell)), strconv.FormatInt(x.End, 10), strconv.Itoa(x.Batch),
				us(x.Inbound), us(x.Wait), us(x.Call), us(x.Publish), us(x.Outbound), us(x.Total())}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
