package service

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/internal/daemon"
	"rgcpred/stream"
)

// item is one received message waiting for the processor.
type item struct {
	m  *nats.Msg
	at time.Time
}

// device is the state of one served device.
type device struct {
	s      *Service
	name   string
	core   *daemon.Core
	raw    chan *nats.Msg
	work   chan item
	stop   chan struct{}
	newest atomic.Int64 // newest frame seq received, -1 none
	last   atomic.Int64 // last seq processed, -1 none
	nc     *nats.Conn

	stimSubj, ctlSubj string

	// processor-goroutine state
	frames stream.Frames
	ctl    stream.Control
	sink   sink
	prev   daemon.Stats

	statusMu  sync.Mutex
	statusBuf []byte
}

// sink publishes a core's decisions and records latency and batch sizes.
type sink struct {
	d       *device
	subject string
	buf     []byte
	at      time.Time // arrival of the message being processed
	lat     prometheus.Observer
	batch   prometheus.Observer
	predict prometheus.Observer
	pubErr  prometheus.Counter
}

func (k *sink) Decisions(t int64, ds []stream.Decision) {
	now := time.Now()
	total := len(ds)
	for len(ds) > 0 {
		n := min(len(ds), stream.MaxDecisionsPerMsg)
		for i := range ds[:n] {
			ds[i].DecidedAt = now.UnixNano()
		}
		b, err := stream.AppendDecisions(k.buf[:0], &stream.Decisions{Decisions: ds[:n]})
		if err == nil {
			k.buf = b
			err = k.d.nc.Publish(k.subject, b)
		}
		if err != nil {
			k.pubErr.Inc()
			k.d.s.limiter.warn(&k.d.s.log, "publish", 1, fmt.Sprintf("publish decisions of frame %d: %v", t, err))
		}
		ds = ds[n:]
	}
	lat := now.Sub(k.at).Seconds()
	for range total {
		k.lat.Observe(lat)
	}
}

func (k *sink) Batch(n int, d time.Duration) {
	k.batch.Observe(float64(n))
	k.predict.Observe(d.Seconds())
}

func (s *Service) newDevice(name string, maxBatch int) (*device, error) {
	d := &device{
		s:        s,
		name:     name,
		raw:      make(chan *nats.Msg, s.cfg.QueueLen),
		work:     make(chan item, s.cfg.QueueLen),
		stop:     make(chan struct{}),
		stimSubj: stream.StimSubject(name),
		ctlSubj:  stream.ControlSubject(name),
	}
	d.newest.Store(-1)
	d.last.Store(-1)
	d.sink = sink{
		d:       d,
		subject: stream.SpikesSubject(name),
		buf:     make([]byte, 0, stream.DecisionsHeaderLen+len(s.cells)*stream.DecisionLen),
		lat:     s.m.latency.WithLabelValues(name),
		batch:   s.m.batch.WithLabelValues(name),
		predict: s.m.predictTime.WithLabelValues(name),
		pubErr:  s.m.publishErrors.WithLabelValues(name),
	}
	core, err := daemon.New(&s.pred, &d.sink, daemon.Config{
		Known:          s.known,
		Cells:          s.cells,
		All:            s.all,
		Stagger:        s.cfg.Stagger,
		MaxBatch:       maxBatch,
		MaxLag:         s.cfg.MaxLag,
		Newest:         d.newest.Load,
		PublishSilence: s.cfg.PublishSilence,
	})
	if err != nil {
		return nil, fmt.Errorf("service: device %s: %w", name, err)
	}
	d.core = core
	return d, nil
}

// read moves received messages to the work queue, stamping their arrival
// and tracking the newest frame seq. After stop it forwards what is left
// and closes the queue.
func (d *device) read() {
	defer close(d.work)
	for {
		select {
		case m := <-d.raw:
			d.enqueue(m, false)
		case <-d.stop:
			for {
				select {
				case m := <-d.raw:
					d.enqueue(m, true)
				default:
					return
				}
			}
		}
	}
}

func (d *device) enqueue(m *nats.Msg, block bool) {
	it := item{m: m, at: time.Now()}
	if m.Subject == d.stimSubj {
		if first, n, err := stream.PeekFrames(m.Data); err == nil {
			last := first + int64(n) - 1
			for {
				cur := d.newest.Load()
				if last <= cur || d.newest.CompareAndSwap(cur, last) {
					break
				}
			}
		}
	}
	if block {
		d.work <- it
		return
	}
	select {
	case d.work <- it:
	default:
		d.reject("overflow", 1, "work queue full: message dropped (its frames become a gap)")
	}
}

func (d *device) reject(reason string, n uint64, msg string) {
	d.s.m.rejected.WithLabelValues(d.name, reason).Add(float64(n))
	d.s.limiter.warn(&d.s.log, d.name+"/"+reason, n, msg, func(e *zerolog.Event) {
		e.Str("device", d.name).Str("reason", reason)
	})
}

// process applies queued messages in order until the queue is closed.
func (d *device) process() {
	for it := range d.work {
		d.handle(it)
	}
}

func (d *device) handle(it item) {
	defer func() {
		if r := recover(); r != nil {
			d.reject("panic", 1, fmt.Sprintf("panic while handling a message on %s: %v", it.m.Subject, r))
		}
	}()
	switch it.m.Subject {
	case d.stimSubj:
		if err := stream.DecodeFrames(it.m.Data, &d.frames); err != nil {
			d.reject(stream.Reason(err), 1, "frames message rejected: "+err.Error())
			return
		}
		d.s.m.framesIn.WithLabelValues(d.name).Add(float64(len(d.frames.Frames)))
		d.sink.at = it.at
		latest := max(d.newest.Load(), d.frames.LastSeq())
		d.core.Frames(&d.frames, latest)
		last := d.core.LastSeq()
		d.last.Store(last)
		d.s.m.lag.WithLabelValues(d.name).Set(float64(max(latest-last, 0)))
	case d.ctlSubj:
		if err := stream.DecodeControl(it.m.Data, &d.ctl); err != nil {
			d.reject(stream.Reason(err), 1, "control message rejected: "+err.Error())
			return
		}
		d.core.Control(&d.ctl)
		if d.ctl.Op == stream.OpReset {
			d.newest.Store(-1)
			d.s.log.Info().Str("device", d.name).Msg("reset")
		}
		d.last.Store(d.core.LastSeq())
	default:
		d.reject("unknown_subject", 1, "message on unexpected subject "+it.m.Subject)
	}
	d.syncStats()
}

// syncStats turns the core's counters into metrics and burst-limited logs.
func (d *device) syncStats() {
	st := d.core.Stats()
	p := &d.prev
	m := d.s.m
	add := func(c *prometheus.CounterVec, v, old uint64, labels ...string) uint64 {
		if v > old {
			c.WithLabelValues(labels...).Add(float64(v - old))
		}
		return v - old
	}
	if n := add(m.rejected, st.Stale, p.Stale, d.name, "stale"); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/stale", n, "duplicate or out-of-order frames dropped", devField(d.name))
	}
	if n := add(m.rejected, st.UnknownCell, p.UnknownCell, d.name, "unknown_cell"); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/unknown_cell", n, "history for a cell the checkpoint does not know", devField(d.name))
	}
	if n := add(m.rejected, st.HistoryLate, p.HistoryLate, d.name, "history_late"); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/history_late", n, "history arrived after the cell's first window; send a reset first", devField(d.name))
	}
	if n := add(m.repaired, st.Clamped, p.Clamped, d.name, "clamped"); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/clamped", n, "intensities outside [-1, 2] clamped", devField(d.name))
	}
	if n := add(m.gapBins, st.GapBins, p.GapBins, d.name); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/gap", n, "missing frames filled by holding the last frame", devField(d.name))
	}
	if n := add(m.restarts, st.Restarts, p.Restarts, d.name); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/restart", n, "gap longer than a window: stream restarted", devField(d.name))
	}
	if n := add(m.misses, st.DeadlineMisses, p.DeadlineMisses, d.name); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/deadline", n, "overloaded: stale decisions skipped (cells step as no spike)", devField(d.name))
	}
	if n := add(m.predictErrors, st.PredictErrors, p.PredictErrors, d.name); n > 0 {
		err := d.core.LastError()
		d.s.limiter.warn(&d.s.log, d.name+"/predict", n, fmt.Sprintf("prediction failed (cells step as no spike): %v", err), devField(d.name))
	}
	add(m.predictions, st.Predictions, p.Predictions, d.name)
	add(m.spikes, st.Spikes, p.Spikes, d.name)
	add(m.histories, st.Histories, p.Histories, d.name)
	add(m.resets, st.Resets, p.Resets, d.name)
	d.prev = st
}

func devField(name string) func(*zerolog.Event) {
	return func(e *zerolog.Event) { e.Str("device", name) }
}

// status answers a status request.
func (d *device) status(m *nats.Msg) {
	cells := make([]int32, len(d.s.cells))
	for i, c := range d.s.cells {
		cells[i] = int32(c)
	}
	d.statusMu.Lock()
	defer d.statusMu.Unlock()
	b, err := stream.AppendStatus(d.statusBuf[:0], &stream.Status{
		LastSeq: d.last.Load(), Shard: uint16(d.s.cfg.Shard), Shards: uint16(d.s.cfg.Shards), Cells: cells,
		Total: uint16(len(d.s.all)), Stagger: d.s.cfg.Stagger,
	})
	if err != nil {
		d.s.log.Error().Err(err).Msg("encode status")
		return
	}
	d.statusBuf = b
	if err := m.Respond(b); err != nil {
		d.s.log.Warn().Err(err).Msg("answer status request")
	}
}
