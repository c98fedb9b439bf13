package service

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/base/msgauth"
	"rgcpred/rgc"
	"rgcpred/serve/daemon"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// item is one received message waiting for the processor.
type item struct {
	m      *nats.Msg
	at     time.Time
	frames int64 // frames the message announces (0 for control)
	ctl    bool  // a control message (its own budget)
	reset  bool  // a reset control message (a budget of its own within control's)
	state  bool  // a hot-standby state request or received state (their own budget)
	resend bool  // an answer to a resend request (its own queue)
}

// BinPeriod is a real-time stream's bin period (rgc.BinRateHz): the
// daemon believes a jump in a device's numbering only as far as wall time
// allows (daemon.Config.BinPeriod).
var BinPeriod = time.Duration(math.Round(float64(time.Second) / rgc.BinRateHz))

// Queue limits of a device besides Config.QueueLen and Config.QueueBytes.
const (
	// rawLen is the capacity of the channel between the NATS client and
	// the reader (one channel for both subjects keeps their order). The
	// reader only sorts messages into the byte-bounded work queue, so the
	// channel stays near empty; 1024 messages is a second of a real-time
	// stream for a reader that the scheduler starves.
	rawLen = 1024
	// ctlQueueLen is the number of control messages that may wait besides
	// the frames: resets and histories are never dropped for frames.
	ctlQueueLen = 64
	// ctlQueueBytes bounds the bytes of waiting control messages (about
	// 15 history messages for 4096 cells).
	ctlQueueBytes = 8 << 20
	// resetQueueLen is the number of resets that may wait besides the
	// histories: a flood of histories never crowds out a reset.
	resetQueueLen = 8
	// dropNoticeEvery is the shortest time between two drop notices of a
	// device (stream.Drop): a flood of refused messages costs one notice
	// per kind and reason per period.
	dropNoticeEvery = 100 * time.Millisecond
)

// RejectReasons are the reason labels of predictord_frames_rejected_total
// (docs/protocol.md, "Robustness rules"); each device's counters start at
// 0 for every one.
var RejectReasons = []string{
	stream.ReasonVersion, stream.ReasonType, stream.ReasonTruncated, stream.ReasonOversized, stream.ReasonLength,
	stream.ReasonReserved, stream.ReasonNonFinite, stream.ReasonRange,
	stream.ReasonAuthMissing, stream.ReasonAuthInvalid, stream.ReasonReplayed,
	"overflow", "control_overflow", "unknown_subject", "panic", "stale", "out_of_stream",
	"unknown_cell", "history_late", "reset_stale", "reset_late", "state_request_limited",
}

// device is the state of one served device.
type device struct {
	s    *Service
	name string
	core *daemon.Core
	raw  chan *nats.Msg
	work chan item
	stop chan struct{}
	last atomic.Int64 // last seq processed, -1 none
	nc   *nats.Conn

	// Queue accounting (reader adds, processor subtracts).
	queuedFrames   atomic.Int64   // frames waiting, the overload policy's backlog
	queuedBytes    atomic.Int64   // bytes of waiting frames messages
	queuedMsgs     atomic.Int64   // waiting frames messages
	queuedCtl      atomic.Int64   // waiting control messages
	queuedCtlBytes atomic.Int64   // bytes of waiting control messages
	queuedResets   atomic.Int64   // waiting resets
	ctlCheck       stream.Control // the reader's decoding of a control message

	// drops are the refusals of the device's messages not yet told to it
	// (notifyDrop).
	drops dropNotices

	// lastFrame is the arrival time (Unix ns) of the last frames message
	// the core accepted, 0 before the first.
	lastFrame atomic.Int64
	// fill logs what the device's subjects carried, for the flight
	// recorder's filler (nil with the recorder off).
	fill *recorder.Log
	// progress is when the processor began its message or last finished
	// a model call within it: a hot-standby holder renews its lease only
	// while no device's processor stalls (progressing).
	progress progress
	// What the status reply reports, written by the processor.
	epoch    atomic.Uint32
	first    atomic.Int64
	resetAt  atomic.Int64 // the core's pending reset (daemon.Core.PendingReset), -1 none
	skipped  atomic.Uint64
	rejected atomic.Uint64

	// rejectedBy counts rejected messages, frames and histories by reason
	// for the JSON status (the metric's labels, per device).
	rejectedMu sync.Mutex
	rejectedBy map[string]uint64
	// prev is the core's counters after the last message: the processor
	// reads it freely and writes it under snapMu; the JSON status reads it
	// under snapMu (the core itself belongs to the processor goroutine).
	snapMu sync.Mutex
	prev   daemon.Stats
	// The device's per-message metrics.
	framesIn prometheus.Counter
	lag      prometheus.Gauge

	stimSubj, ctlSubj, eventSubj string
	eventBuf                     []byte

	// Message authentication (Config.Keys; nil: off): guard checks what
	// the device sends (reader goroutine), down signs what is published
	// (processor goroutine, out its message), up checks the device's
	// decisions resend requests (the standby group's holder).
	guard    *stream.Guard
	down, up *stream.Auth
	out      nats.Msg
	// The last stamp of the group's reset announcements (announce).
	announceMu sync.Mutex
	announced  int64

	// processor-goroutine state
	frames stream.Frames
	ctl    stream.Control
	sink   sink
	sb     *standby.Replica // hot standby (service_standby.go); nil: off
	resend *resender        // resend requests (Config.ResendWait); nil: off

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

// DecisionTiming is one decision's way through the daemon
// (Config.Timing): the arrival of the frames message whose processing
// decided it, the model call that computed it (until its window was
// handed over, where the engine hands windows over as computed), and its
// publication (the decision's DecidedAt).
type DecisionTiming struct {
	// Device, Cell and End identify the decision (the window ending at bin
	// End of the device's stream).
	Device string
	Cell   int32
	End    int64
	// Batch is the number of windows of the model call; 0 for a decision
	// taken without one (skipped under overload), whose CallStart and
	// CallEnd are then Arrived.
	Batch                                  int
	Arrived, CallStart, CallEnd, Published time.Time
}

func (k *sink) Decisions(t int64, ds []stream.Decision) {
	now := time.Now()
	k.d.progress.step(now)
	total, decided := len(ds), ds
	for len(ds) > 0 {
		n := min(len(ds), stream.MaxDecisionsPerMsg)
		for i := range ds[:n] {
			ds[i].DecidedAt = now.UnixNano()
		}
		b, err := stream.AppendDecisions(k.buf[:0], &stream.Decisions{Decisions: ds[:n]})
		if err == nil {
			k.buf = b
			err = k.d.send(k.subject, t, b)
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
	if f := k.d.s.cfg.Timing; f != nil {
		k.timing(f, decided, now)
	}
}

// timing reports the decisions ds, published at now, to f, with the
// model call that took them (daemon.Core.Call). Decisions sent during
// their call (handed over as computed) have the time their window was
// handed over as their call's end.
func (k *sink) timing(f func(DecisionTiming), ds []stream.Decision, now time.Time) {
	n, start, end := k.d.core.Call()
	if end.IsZero() {
		end = now
	}
	for i := range ds {
		x := &ds[i]
		dt := DecisionTiming{Device: k.d.name, Cell: x.Cell, End: x.End, Batch: n,
			Arrived: k.at, CallStart: start, CallEnd: end, Published: now}
		if n == 0 || x.Kind == stream.KindSkipped {
			dt.Batch, dt.CallStart, dt.CallEnd = 0, k.at, k.at
		}
		f(dt)
	}
}

func (k *sink) Batch(n int, d time.Duration) {
	k.d.progress.step(time.Now())
	k.batch.Observe(float64(n))
	k.predict.Observe(d.Seconds())
}

// Stream publishes a stream event: a new epoch began, every cell's history
// is lost unless the device resends it (docs/protocol.md).
func (k *sink) Stream(ev stream.Event) {
	d := k.d
	d.s.rec.due(d.name) // the recording's session header again, before age or size limits evict it
	d.epoch.Store(ev.Epoch)
	d.first.Store(ev.First)
	d.s.m.epoch.WithLabelValues(d.name).Set(float64(ev.Epoch))
	b, err := stream.AppendEvent(d.eventBuf[:0], &ev)
	if err == nil {
		d.eventBuf = b
		err = d.sendEvent(ev.Epoch, b)
	}
	if err != nil {
		k.pubErr.Inc()
		d.s.limiter.warn(&d.s.log, "publish", 1, fmt.Sprintf("publish stream event of epoch %d: %v", ev.Epoch, err))
	}
	reasons := [...]string{stream.EventFirst: "first", stream.EventReset: "reset", stream.EventRestart: "restart"}
	e := d.s.log.Info()
	if ev.Reason == stream.EventRestart {
		e = d.s.log.Warn()
	}
	e.Str("device", d.name).Uint32("epoch", ev.Epoch).Int64("first_seq", ev.First).Int64("prev_last_seq", ev.PrevLast).
		Str("reason", reasons[ev.Reason]).Msg("stream started: cell histories reset, the device should resend them")
}

func (s *Service) newDevice(name string, maxBatch int) (*device, error) {
	s.m.initDevice(name)
	d := &device{
		s:          s,
		name:       name,
		raw:        make(chan *nats.Msg, rawLen),
		work:       make(chan item, s.cfg.QueueLen+ctlQueueLen+stateQueueLen),
		stop:       make(chan struct{}),
		stimSubj:   stream.StimSubject(name),
		ctlSubj:    stream.ControlSubject(name),
		eventSubj:  stream.EventsSubject(name),
		eventBuf:   make([]byte, 0, stream.EventLen),
		rejectedBy: map[string]uint64{},
		framesIn:   s.m.framesIn.WithLabelValues(name),
		lag:        s.m.lag.WithLabelValues(name),
	}
	for _, r := range RejectReasons {
		s.m.rejected.WithLabelValues(name, r) // 0 until the first refusal
	}
	d.last.Store(-1)
	d.first.Store(-1)
	d.resetAt.Store(-1)
	d.sink = sink{
		d:       d,
		subject: stream.SpikesSubject(name),
		buf:     make([]byte, 0, stream.DecisionsHeaderLen+len(s.cells)*stream.DecisionLen),
		lat:     s.m.latency.WithLabelValues(name),
		batch:   s.m.batch.WithLabelValues(name),
		predict: s.m.predictTime.WithLabelValues(name),
		pubErr:  s.m.publishErrors.WithLabelValues(name),
	}
	core, err := daemon.New(s.pred, &d.sink, daemon.Config{
		Known:          s.known,
		Cells:          s.cells,
		All:            s.all,
		Stagger:        s.cfg.Stagger,
		MaxBatch:       maxBatch,
		MaxLag:         s.cfg.MaxLag,
		Backlog:        d.queuedFrames.Load,
		PublishSilence: s.cfg.PublishSilence,
		Policy:         s.cfg.Policy,
		Gather:         s.gather(),
		WholeCalls:     s.cfg.WholeCalls,
		Replica:        s.cfg.Replica,
		BinPeriod:      BinPeriod,
		ResendWait:     s.cfg.ResendWait,
	})
	if err != nil {
		return nil, fmt.Errorf("service: device %s: %w", name, err)
	}
	d.core = core
	if s.cfg.ResendWait > 0 {
		d.resend = newResender(s.m, name)
	}
	return d, nil
}

// useKeys turns on message authentication with the device's keys.
func (d *device) useKeys(ks msgauth.Keys) error {
	k, ok := ks[d.name]
	if !ok {
		return fmt.Errorf("service: device %s: no keys in the key file", d.name)
	}
	up, err := stream.NewAuth(k.Up)
	if err == nil {
		d.down, err = stream.NewAuth(k.Down)
	}
	if err != nil {
		return fmt.Errorf("service: device %s: %w", d.name, err)
	}
	d.guard, d.up = stream.NewGuard(up), up
	return nil
}

// send publishes a decisions message of frame t: through the standby
// gate in a group (which signs it when keys are configured), else signed
// with the Down key when keys are configured, else plain.
func (d *device) send(subject string, t int64, b []byte) error {
	switch {
	case d.sb != nil:
		return d.sb.Publish(subject, d.core.Epoch(), t, b)
	case d.down != nil:
		return d.sign(subject, b)
	}
	return d.nc.Publish(subject, b)
}

// sendEvent publishes a stream event message of epoch (see send).
func (d *device) sendEvent(epoch uint32, b []byte) error {
	switch {
	case d.sb != nil:
		return d.sb.Publish(d.eventSubj, epoch, stream.EventBin, b)
	case d.down != nil:
		return d.sign(d.eventSubj, b)
	}
	return d.nc.Publish(d.eventSubj, b)
}

// sign publishes b on subject with an authenticator under the Down key.
func (d *device) sign(subject string, b []byte) error {
	m := &d.out
	m.Subject, m.Data = subject, b
	d.down.Sign(m)
	return d.nc.PublishMsg(m)
}

// authentic checks a message received from NATS (not one the daemon
// queued itself) with the device's guard (stream.Guard). It reports the
// refusal's reason, "" for none.
func (d *device) authentic(m *nats.Msg) string {
	if m.Sub == nil {
		return ""
	}
	return d.guard.Admit(m, m.Subject == d.ctlSubj)
}

// read moves received messages to the work queue, stamping their arrival.
// After stop it forwards what is left and closes the queue.
func (d *device) read() {
	defer close(d.work)
	for {
		select {
		case m := <-d.raw:
			d.enqueue(m)
		case <-d.stop:
			for {
				select {
				case m := <-d.raw:
					d.enqueue(m)
				default:
					return
				}
			}
		}
	}
}

// enqueue queues a message within the budgets: frames messages within
// Config.QueueLen messages and Config.QueueBytes bytes, control messages
// within their own budget, so a flood of frames never crowds out a reset
// or a history. Oversized payloads are rejected here, before they occupy
// any queue. The frames a message announces join the backlog the overload
// policy sees; announcing frames cannot make the core skip a decision
// beyond what the queue bounds, since only frames in the queue count.
func (d *device) enqueue(m *nats.Msg) {
	it := item{m: m, at: time.Now()}
	size := int64(len(m.Data))
	if m.Subject == d.stimSubj || m.Subject == d.ctlSubj {
		if reason := d.authentic(m); reason != "" {
			d.refuse(m.Subject, reason, "message on "+m.Subject+" refused: "+reason+" (a publisher without the device's key?)")
			return
		}
	}
	switch m.Subject {
	case d.stimSubj:
		if size > stream.FramesHeaderLen+stream.MaxFramesPerMsg*stream.FrameLen {
			d.refuse(m.Subject, stream.ReasonOversized, fmt.Sprintf("frames message of %d bytes rejected before queueing", size))
			return
		}
		if _, n, err := stream.PeekFrames(m.Data); err == nil {
			it.frames = int64(n)
		}
		if d.queuedMsgs.Load() >= int64(d.s.cfg.QueueLen) || d.queuedBytes.Load()+size > d.s.cfg.QueueBytes {
			d.refuse(m.Subject, "overflow", "work queue full: frames message dropped (its frames become a gap)")
			return
		}
		d.queuedMsgs.Add(1)
		d.queuedBytes.Add(size)
		d.queuedFrames.Add(it.frames)
	case d.ctlSubj:
		if size > stream.MaxPayload {
			d.refuse(m.Subject, stream.ReasonOversized, fmt.Sprintf("control message of %d bytes rejected before queueing", size))
			return
		}
		// Validated here, so that only valid control messages take the
		// queue's room; resets have a budget of their own that no flood
		// of histories can take.
		if err := stream.DecodeControl(m.Data, &d.ctlCheck); err != nil {
			d.refuse(m.Subject, stream.Reason(err), "control message rejected before queueing: "+err.Error())
			return
		}
		it.ctl = true
		it.reset = d.ctlCheck.Op != stream.OpHistory
		switch {
		case it.reset && d.queuedResets.Load() >= resetQueueLen:
			d.refuse(m.Subject, "control_overflow", "reset queue full: reset dropped (the device should resend it)")
			return
		case it.reset:
			d.queuedResets.Add(1)
		case d.queuedCtl.Load() >= ctlQueueLen || d.queuedCtlBytes.Load()+size > ctlQueueBytes:
			d.refuse(m.Subject, "control_overflow", "control queue full: history dropped (the device should resend it)")
			return
		default:
			d.queuedCtl.Add(1)
			d.queuedCtlBytes.Add(size)
		}
	default:
		if d.resend.isAnswer(m.Subject) {
			d.enqueueAnswer(it)
			return
		}
		if d.sb == nil || !d.sb.IsState(m.Subject) {
			d.reject("unknown_subject", 1, "message on unexpected subject "+m.Subject)
			return
		}
		if size > stream.MaxPayload || !d.standbyAdmit(m) {
			return
		}
		it.state = true
	}
	d.work <- it // never blocks: the budgets above keep the queue below its capacity
}

// dequeued releases a message's share of the queue budgets.
func (d *device) dequeued(it item) {
	size := int64(len(it.m.Data))
	if it.state {
		d.sb.Done(it.m)
		return
	}
	if it.resend {
		return
	}
	if it.reset {
		d.queuedResets.Add(-1)
		return
	}
	if it.ctl {
		d.queuedCtl.Add(-1)
		d.queuedCtlBytes.Add(-size)
		return
	}
	d.queuedMsgs.Add(-1)
	d.queuedBytes.Add(-size)
	d.queuedFrames.Add(-it.frames)
}

// refuse rejects one message the device sent on subject (reject) and
// tells the device (notifyDrop).
func (d *device) refuse(subject, reason, msg string) {
	d.reject(reason, 1, msg)
	kind := uint8(stream.DropFrames)
	if subject == d.ctlSubj {
		kind = stream.DropControl
	}
	d.notifyDrop(kind, reason, 1)
}

func (d *device) reject(reason string, n uint64, msg string) {
	d.countRejected(reason, n)
	d.s.m.rejected.WithLabelValues(d.name, reason).Add(float64(n))
	d.s.limiter.warn(&d.s.log, d.name+"/"+reason, n, msg, func(e *zerolog.Event) {
		e.Str("device", d.name).Str("reason", reason)
	})
}

// process applies queued messages in order until the queue is closed.
// While frames are held for a new numbering and nothing arrives, it ticks
// the core (daemon.Core.Tick), so that a device that stops right after a
// jump still gets its last frames decided; while the core waits for resent
// frames, it ends a wait whose deadline passed (daemon.Core.Expire), unless
// its requests wait for the connection (sendHeld);
// otherwise it lets the core ask for a silent stream's tail
// (daemon.Core.AskTail).
// Resend answers go before the queued messages, which may wait for them.
func (d *device) process() {
	tick := time.NewTicker(daemon.DefaultConfirmWait / 4)
	defer tick.Stop()
	answers := d.answers()
	for {
		select {
		case it := <-answers: // first: the frames queued meanwhile wait for it
			d.handle(it)
			continue
		default:
		}
		it, ok, got := d.poll()
		if !got {
			select {
			case it = <-answers:
				ok = true
			case it, ok = <-d.work:
			case now := <-tick.C:
				if len(d.work) == 0 {
					d.tick(now)
				}
				continue
			}
		}
		if !ok {
			return
		}
		d.handle(it)
		if len(d.work) == 0 {
			// Nothing waits: windows gathered while the core was behind
			// go to the model now.
			d.core.Flush()
		}
	}
}

// tick runs the core's timers when nothing arrives: a silent stream's
// tail request (at once after a reconnect), or the held frames' and a
// resend wait's deadlines (a wait whose requests wait for the connection
// runs from when they go out; one asked once more, from now).
func (d *device) tick(now time.Time) {
	if d.holding() {
		d.sendHeld(now)
	}
	if d.core.Held() == 0 && !d.core.Waiting() {
		d.tailAfterReconnect()
		if d.core.AskTail(now) {
			d.syncStats()
		}
		d.asked(now)
		return
	}
	d.sink.at = now
	d.core.Tick(now)
	if !d.holding() {
		d.core.Expire(now)
		d.asked(now)
	}
	d.afterFrames()
	d.syncStats()
}

func (d *device) handle(it item) {
	d.progress.begin(time.Now())
	defer d.progress.end()
	d.dequeued(it)
	if d.sb != nil {
		d.sb.Seen(it.m)
	}
	defer func() {
		if r := recover(); r != nil {
			d.reject("panic", 1, fmt.Sprintf("panic while handling a message on %s: %v", it.m.Subject, r))
		}
	}()
	switch it.m.Subject {
	case d.stimSubj:
		d.fill.Add(it.m, d.stimSubj)
		if err := stream.DecodeFrames(it.m.Data, &d.frames); err != nil {
			d.refuse(it.m.Subject, stream.Reason(err), "frames message rejected: "+err.Error())
			return
		}
		d.framesIn.Add(float64(len(d.frames.Frames)))
		d.lastFrame.Store(it.at.UnixNano())
		if d.sb != nil {
			d.sb.Arrived(it.at, d.frames.FirstSeq, d.frames.LastSeq())
		}
		d.sink.at = it.at
		if d.holding() {
			d.sendHeld(time.Now()) // the first frames after a reconnect find the wait dated from it
		}
		d.core.Receive(&d.frames, d.queuedFrames.Load(), it.at)
		d.asked(time.Now())
		d.afterFrames()
	case d.ctlSubj:
		d.fill.Add(it.m, d.ctlSubj)
		if err := stream.DecodeControl(it.m.Data, &d.ctl); err != nil {
			d.refuse(it.m.Subject, stream.Reason(err), "control message rejected: "+err.Error())
			return
		}
		d.core.EndWait() // the frames received before it first
		d.core.Control(&d.ctl)
		switch d.ctl.Op {
		case stream.OpReset:
			d.s.limiter.info(&d.s.log, d.name+"/reset", 1, "reset: the device's stream and cell states are cleared", devField(d.name))
		case stream.OpResetAt:
			d.s.log.Info().Str("device", d.name).Uint32("epoch", d.ctl.Epoch).Int64("at", d.ctl.At).
				Msg("reset announced on the control subject: it applies before that frame of that epoch")
		}
		d.first.Store(d.core.First())
		d.last.Store(d.core.LastSeq())
	default:
		switch {
		case it.state:
			d.standbyMsg(it.m)
		case it.resend:
			if len(it.m.Data) > 0 {
				d.fill.AddResent(it.m, d.stimSubj) // frames the recording may lack too
			}
			d.handleAnswer(it.m, it.at)
		default:
			d.reject("unknown_subject", 1, "message on unexpected subject "+it.m.Subject)
		}
	}
	d.syncStats()
}

// afterFrames publishes the core's progress after frames were processed.
func (d *device) afterFrames() {
	d.last.Store(d.core.LastSeq())
	if d.sb != nil {
		d.sb.AfterFrames(d.core.Epoch(), d.core.LastSeq())
	}
	d.lag.Set(float64(max(d.queuedFrames.Load(), 0)))
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
		d.countRejected("stale", n)
		d.notifyDrop(stream.DropFrames, "stale", n)
		d.s.limiter.warn(&d.s.log, d.name+"/stale", n, "duplicate or out-of-order frames dropped", devField(d.name))
	}
	if n := add(m.rejected, st.UnknownCell, p.UnknownCell, d.name, "unknown_cell"); n > 0 {
		d.countRejected("unknown_cell", n)
		d.notifyDrop(stream.DropControl, "unknown_cell", n)
		d.s.limiter.warn(&d.s.log, d.name+"/unknown_cell", n, "history for a cell the checkpoint does not know", devField(d.name))
	}
	if n := add(m.rejected, st.HistoryLate, p.HistoryLate, d.name, "history_late"); n > 0 {
		d.countRejected("history_late", n)
		d.notifyDrop(stream.DropControl, "history_late", n)
		d.s.limiter.warn(&d.s.log, d.name+"/history_late", n, "history arrived after the cell's first window; send a reset first", devField(d.name))
	}
	if n := add(m.repaired, st.Clamped, p.Clamped, d.name, "clamped"); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/clamped", n, "intensities outside [-1, 2] clamped", devField(d.name))
	}
	if n := add(m.gapBins, st.GapBins, p.GapBins, d.name); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/gap", n, "missing frames filled by holding the last frame", devField(d.name))
	}
	if n := add(m.restarts, st.Restarts, p.Restarts, d.name); n > 0 {
		d.s.limiter.warn(&d.s.log, d.name+"/restart", n, "the device's numbering changed: stream restarted in a new epoch", devField(d.name))
	}
	if n := add(m.rejected, st.OutOfStream, p.OutOfStream, d.name, "out_of_stream"); n > 0 {
		d.countRejected("out_of_stream", n)
		d.notifyDrop(stream.DropFrames, "out_of_stream", n)
		d.s.limiter.warn(&d.s.log, d.name+"/out_of_stream", n, "frames that do not continue the stream dropped (another publisher or a forged frame?)", devField(d.name))
	}
	if n := add(m.skipped, st.DeadlineMisses, p.DeadlineMisses, d.name); n > 0 {
		d.skipped.Add(n)
		d.s.limiter.warn(&d.s.log, d.name+"/deadline", n, "overloaded: stale decisions skipped (cells step as no spike, skipped decisions published)", devField(d.name))
	}
	add(m.filled, st.FilledDecisions, p.FilledDecisions, d.name)
	if n := add(m.predictErrors, st.PredictErrors, p.PredictErrors, d.name); n > 0 {
		d.skipped.Add(n)
		err := d.core.LastError()
		d.s.limiter.warn(&d.s.log, d.name+"/predict", n, fmt.Sprintf("prediction failed (cells step as no spike): %v", err), devField(d.name))
	}
	add(m.predictions, st.Predictions, p.Predictions, d.name)
	add(m.spikes, st.Spikes, p.Spikes, d.name)
	add(m.histories, st.Histories, p.Histories, d.name)
	add(m.resets, st.Resets, p.Resets, d.name)
	if n := add(m.rejected, st.ResetsStale, p.ResetsStale, d.name, "reset_stale"); n > 0 {
		d.countRejected("reset_stale", n)
		d.notifyDrop(stream.DropControl, "reset_stale", n)
		d.s.limiter.warn(&d.s.log, d.name+"/reset_stale", n,
			"reset at a frame ignored: its epoch is over (another reset of it applied first, or the stream restarted)", devField(d.name))
	}
	if n := add(m.rejected, st.ResetsLate, p.ResetsLate, d.name, "reset_late"); n > 0 {
		d.countRejected("reset_late", n)
		d.notifyDrop(stream.DropControl, "reset_late", n)
		d.s.log.Error().Str("device", d.name).Uint64("late", n).
			Msg("reset at a frame arrived after that frame: applied at once, at this instance's own frame (its decisions may differ from the group's)")
		d.standbyDiverged()
	}
	d.syncResend()
	d.storeResetAt()
	d.snapMu.Lock()
	d.prev = st
	d.snapMu.Unlock()
}

// storeResetAt publishes the core's pending reset for the status.
func (d *device) storeResetAt() {
	at, ok := d.core.PendingReset()
	if !ok {
		at = -1
	}
	d.resetAt.Store(at)
}

// countRejected adds n rejections of reason to the status counters (the
// caller counts the metric).
func (d *device) countRejected(reason string, n uint64) {
	d.rejected.Add(n)
	d.rejectedMu.Lock()
	d.rejectedBy[reason] += n
	d.rejectedMu.Unlock()
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
		Total: uint16(len(d.s.all)), Stagger: d.s.cfg.Stagger, StimMode: d.s.cfg.StimMode,
		Epoch: d.epoch.Load(), First: d.first.Load(), Skipped: d.skipped.Load(), Rejected: d.rejected.Load(),
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

// gather returns the windows a device's core gathers per model call while
// behind (Config.Gather).
func (s *Service) gather() int { return Gather(s.cfg.Gather, s.model.Load()) }

// Gather applies Config.Gather's rule: the windows gathered per model call
// while behind, for a configured value g and the model m serves.
func Gather(g int, m *Model) int {
	switch {
	case g < 0:
		return 0
	case g > 0:
		return g
	case m != nil:
		return m.Gather
	}
	return 0
}
