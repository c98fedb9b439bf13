package service

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/stream"
)

// metrics are the service's Prometheus metrics (docs/protocol.md and
// docs/operations.md list them).
type metrics struct {
	framesIn      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	repaired      *prometheus.CounterVec
	gapBins       *prometheus.CounterVec
	restarts      *prometheus.CounterVec
	resets        *prometheus.CounterVec
	histories     *prometheus.CounterVec
	predictions   *prometheus.CounterVec
	spikes        *prometheus.CounterVec
	skipped       *prometheus.CounterVec
	filled        *prometheus.CounterVec
	epoch         *prometheus.GaugeVec
	predictErrors *prometheus.CounterVec
	publishErrors *prometheus.CounterVec
	batch         *prometheus.HistogramVec
	predictTime   *prometheus.HistogramVec
	latency       *prometheus.HistogramVec
	cells         *prometheus.GaugeVec
	lag           *prometheus.GaugeVec
	reloads       *prometheus.CounterVec
	nats          *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	ready         prometheus.Gauge
	// resend requests (Config.ResendWait)
	resendRequests, resendRecovered, resendIgnored *prometheus.CounterVec
	// JetStream features' failed tries at start-up (startRetried)
	startRetries *prometheus.CounterVec
}

// latencyBuckets are the upper bounds (seconds) of the decision-latency and
// model-call histograms: fine around a model call (0.1-5 ms), with the
// real-time bound of a decision (2 ms) and its 80-bin period (80 ms) among
// them, so that the share of decisions within either is read off a bucket
// exactly (the le="0.002" and le="0.08" series).
var latencyBuckets = []float64{
	50e-6, 100e-6, 200e-6, 300e-6, 500e-6, 750e-6,
	1e-3, 1.5e-3, 2e-3, 3e-3, 5e-3, 7.5e-3,
	10e-3, 20e-3, 40e-3, 80e-3, 160e-3, 320e-3, 640e-3,
}

// newMetrics registers the metrics on reg; frameAges reports each device's
// frame age (seconds since its last valid frames message) at every scrape.
func newMetrics(reg prometheus.Registerer, frameAges func(report func(device string, seconds float64))) *metrics {
	dev := []string{"device"}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "predictord", Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	hv := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "predictord", Name: name, Help: help, Buckets: buckets}, dev)
		reg.MustRegister(h)
		return h
	}
	gv := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "predictord", Name: name, Help: help}, dev)
		reg.MustRegister(g)
		return g
	}
	m := &metrics{
		framesIn:    cv("frames_total", "Stimulus frames received in valid messages.", "device"),
		rejected:    cv("frames_rejected_total", "Messages, frames or histories rejected, by reason (docs/protocol.md).", "device", "reason"),
		repaired:    cv("frames_repaired_total", "Frames kept after a repair, by reason (clamped).", "device", "reason"),
		gapBins:     cv("gap_bins_total", "Missing bins filled by holding the last frame.", "device"),
		restarts:    cv("stream_restarts_total", "Stream restarts after a gap longer than a window.", "device"),
		resets:      cv("resets_total", "Reset control messages applied.", "device"),
		histories:   cv("histories_total", "Initial spike histories accepted.", "device"),
		predictions: cv("predictions_total", "Windows predicted.", "device"),
		spikes:      cv("spikes_total", "Spike decisions published.", "device"),
		skipped: cv("decisions_skipped_total",
			"Decisions never computed: skipped by the overload policy, --max-lag (cell stepped as no spike, a skipped decision published).", "device"),
		filled:        cv("filled_decisions_total", "Decisions whose window held gap-filled bins (flagged on the wire).", "device"),
		epoch:         gv("stream_epoch", "The device's current stream epoch (0 before the first frame)."),
		predictErrors: cv("predict_errors_total", "Windows whose prediction failed (cell stepped as no spike).", "device"),
		publishErrors: cv("publish_errors_total", "Decision messages that could not be published.", "device"),
		batch:         hv("batch_size", "Windows per model call.", prometheus.ExponentialBuckets(1, 2, 13)),
		predictTime:   hv("predict_seconds", "Duration of one model call.", latencyBuckets),
		latency:       hv("decision_latency_seconds", "From a frame message's arrival to the publication of a decision it caused.", latencyBuckets),
		cells:         gv("cells_served", "Cells this daemon serves."),
		lag:           gv("lag_bins", "Newest frame received minus the last frame processed."),
		reloads:       cv("reloads_total", "Checkpoint reloads (SIGHUP), by result.", "result"),
		nats:          cv("nats_events_total", "NATS connection events (disconnect, reconnect, slow_consumer, error).", "event"),
		dropped:       cv("nats_dropped_messages_total", "Messages the NATS client dropped because the subscription's buffer was full (slow consumer), by subscription subject.", "device", "subject"),
		ready:         prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "predictord", Name: "ready", Help: "1 while /readyz answers 200 (sampled every monitor period)."}),
	}
	m.resendRequests = cv("resend_requests_total", "Requests to the device to resend frames: a gap's, by outcome (answered, partial, none, timeout), and the frames after a silent stream's last one (tail).", "device", "outcome")
	m.resendRecovered = cv("resend_recovered_bins_total", "Bins recovered with the frames the device resent: a gap's, or a silent stream's tail.", "device")
	m.resendIgnored = cv("resend_ignored_frames_total", "Resent frames not used: outside the gap asked for, or answering a request no longer pending.", "device")
	m.startRetries = newStartRetries(reg)
	for _, r := range reloadResults {
		m.reloads.WithLabelValues(r)
	}
	for _, e := range natsEvents {
		m.nats.WithLabelValues(e)
	}
	reg.MustRegister(m.ready, &frameAgeCollector{
		desc: prometheus.NewDesc("predictord_frame_age_seconds", "Seconds since the device's last valid frames message arrived (absent before the first).", dev, nil),
		ages: frameAges,
	})
	return m
}

// The known labels of the labelled counters, each series created at 0
// before its first event (the Prometheus convention: a query or a grep
// finds the counter before anything went wrong).
var (
	// rejectReasons are the reasons of frames_rejected_total
	// (docs/protocol.md, "Robustness rules").
	rejectReasons = []string{
		stream.ReasonVersion, stream.ReasonType, stream.ReasonTruncated, stream.ReasonOversized, stream.ReasonLength,
		stream.ReasonReserved, stream.ReasonNonFinite, stream.ReasonRange,
		"stale", "out_of_stream", "unknown_cell", "history_late", "reset_stale", "reset_late",
		"overflow", "control_overflow", "unknown_subject", "panic", "state_request_limited",
	}
	// repairReasons are the reasons of frames_repaired_total.
	repairReasons = []string{"clamped"}
	// reloadResults are the results of reloads_total.
	reloadResults = []string{"ok", "error"}
	// natsEvents are the events of nats_events_total.
	natsEvents = []string{"disconnect", "reconnect", "slow_consumer", "error"}
)

// initDevice creates device name's series of every device counter at 0,
// each rejection and repair reason included.
func (m *metrics) initDevice(name string) {
	for _, c := range []*prometheus.CounterVec{m.framesIn, m.gapBins, m.restarts, m.resets, m.histories, m.predictions,
		m.spikes, m.skipped, m.filled, m.predictErrors, m.publishErrors, m.resendRecovered, m.resendIgnored} {
		c.WithLabelValues(name)
	}
	for _, o := range ResendOutcomes {
		m.resendRequests.WithLabelValues(name, o)
	}
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(name, r)
	}
	for _, r := range repairReasons {
		m.repaired.WithLabelValues(name, r)
	}
}

// frameAgeCollector exports predictord_frame_age_seconds, computed at scrape
// time so that it keeps growing while no frames arrive.
type frameAgeCollector struct {
	desc *prometheus.Desc
	ages func(report func(device string, seconds float64))
}

// Describe implements prometheus.Collector.
func (c *frameAgeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *frameAgeCollector) Collect(ch chan<- prometheus.Metric) {
	c.ages(func(device string, seconds float64) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, seconds, device)
	})
}

// limiter logs each kind of event at most once per period ("once per
// burst"); the events in between are counted and reported with the next
// line.
type limiter struct {
	period time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
	supp   map[string]uint64
}

func newLimiter(period time.Duration) *limiter {
	return &limiter{period: period, last: map[string]time.Time{}, supp: map[string]uint64{}}
}

// warn logs msg at warn level unless a line of the same key went out less
// than a period ago; n is the number of events this call stands for.
func (l *limiter) warn(log *zerolog.Logger, key string, n uint64, msg string, fields ...func(*zerolog.Event)) {
	l.emit(log.Warn, key, n, msg, fields...)
}

// info is warn at the info level (events a device causes on purpose, such
// as resets, which anyone on the subject can send).
func (l *limiter) info(log *zerolog.Logger, key string, n uint64, msg string, fields ...func(*zerolog.Event)) {
	l.emit(log.Info, key, n, msg, fields...)
}

func (l *limiter) emit(level func() *zerolog.Event, key string, n uint64, msg string, fields ...func(*zerolog.Event)) {
	now := time.Now()
	l.mu.Lock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.period {
		l.supp[key] += n
		l.mu.Unlock()
		return
	}
	supp := l.supp[key]
	l.supp[key] = 0
	l.last[key] = now
	l.mu.Unlock()
	e := level().Str("kind", key).Uint64("events", n).Uint64("suppressed_since_last", supp)
	for _, f := range fields {
		f(e)
	}
	e.Msg(msg)
}
