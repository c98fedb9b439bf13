package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/rgc"
	"rgcpred/serve/daemon"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// StandbyConfig configures hot standby (package standby): several
// instances serve the same devices and cells, every one computes the
// decisions, the holder of the group's lease publishes them.
type StandbyConfig struct {
	// Group names the replica group (the lease's key): every instance
	// serving the same devices and cells with the same model uses it.
	Group string
	// ID identifies this instance in the group (default: host, pid and a
	// random suffix).
	ID string
	// Bucket is the JetStream key-value bucket of the leases (default
	// DefaultStandbyBucket).
	Bucket string
	// TTL is the lease's time to live (default standby.DefaultTTL): a
	// holder that stops renewing (killed, stalled, cut off) is replaced
	// within about TTL plus TTL/10.
	TTL time.Duration
	// Buffer is the number of messages per device a standby keeps until it
	// sees the holder's copy (default 16384, 16 s of one message per frame
	// at 1 kHz); a takeover after a longer silence of the holder loses the
	// oldest.
	Buffer int
	// SyncEvery is how often a joining standby asks for the holder's state
	// until it gets a usable one (default 250 ms).
	SyncEvery time.Duration
}

// DefaultStandbyBucket is StandbyConfig.Bucket's default.
const DefaultStandbyBucket = "rgcpred_standby"

// Bounds of a joining standby's retained messages, kept to replay after
// restoring the holder's state: the oldest go first (the state the standby
// awaits is recent).
const (
	maxRetained      = 1 << 16
	maxRetainedBytes = 64 << 20
)

// The state requests and received states of a device wait on their own
// budget, never the device's control budget: one of each at a time, and a
// synced instance answers at most one request per stateEvery (a snapshot
// costs the processor far more than a frame).
const (
	stateQueueLen = 2
	stateEvery    = 20 * time.Millisecond
)

// deviceStandby is a device's hot-standby state; its zero value is
// standby off.
type deviceStandby struct {
	on   bool
	gate *standby.Gate
	// snapSubj receives state requests (answered by a synced instance);
	// applySubj carries a received state to the processor.
	snapSubj, applySubj string
	// synced: the core's state is the group's (it saw the stream from its
	// start, or restored the holder's state). Only a synced instance
	// publishes, answers state requests or may take the lease.
	synced atomic.Bool
	// replaying: the processor replays the retained messages after a
	// restore; their decisions go through the gate although the instance
	// is not synced yet (processor goroutine only).
	replaying bool
	// retained holds the frames and control messages processed before the
	// instance synced, replayed after the state they follow (processor
	// goroutine only).
	retained      []*nats.Msg
	retainedBytes int
	// A state request and a received state waiting for the processor;
	// when the last request was admitted (Unix ns).
	requestQueued, applyQueued atomic.Bool
	lastRequest                atomic.Int64
	restores                   atomic.Uint64
	state                      *standbyState
}

// standbyState is the service's hot-standby state.
type standbyState struct {
	cfg   StandbyConfig
	lease *standby.Lease
	stop  func()
	// resync starts a device's catch-up again (standbyDiverged).
	resync func(d *device)
}

// publish sends a decisions message of frame t: directly without standby,
// through the gate with it.
func (d *device) publish(subject string, t int64, b []byte) error {
	if !d.sb.on {
		return d.nc.Publish(subject, b)
	}
	if !d.sb.synced.Load() && !d.sb.replaying {
		return nil
	}
	g := d.sb.gate
	return g.Publish(subject, g.Next(d.core.Epoch(), t), b)
}

// publishEvent sends a stream event message (see publish).
func (d *device) publishEvent(epoch uint32, b []byte) error {
	if !d.sb.on {
		return d.nc.Publish(d.eventSubj, b)
	}
	if !d.sb.synced.Load() && !d.sb.replaying {
		return nil
	}
	g := d.sb.gate
	return g.Publish(d.eventSubj, g.Next(epoch, standby.EventBin), b)
}

// standbySeen keeps a copy of a frames or control message an unsynced
// standby processes, to replay it after restoring the holder's state.
func (d *device) standbySeen(m *nats.Msg) {
	if !d.sb.on {
		return
	}
	if d.sb.synced.Load() {
		d.sb.retained, d.sb.retainedBytes = nil, 0 // synced without a restore: nothing to replay
		return
	}
	if m.Subject != d.stimSubj && m.Subject != d.ctlSubj {
		return
	}
	for len(d.sb.retained) > 0 && (len(d.sb.retained) == maxRetained || d.sb.retainedBytes+len(m.Data) > maxRetainedBytes) {
		d.sb.retainedBytes -= len(d.sb.retained[0].Data)
		d.sb.retained[0] = nil
		d.sb.retained = d.sb.retained[1:]
	}
	d.sb.retained = append(d.sb.retained, m)
	d.sb.retainedBytes += len(m.Data)
}

// stateAdmit reports whether a state request or a received state may wait
// for the processor (reader goroutine): requests only on a synced instance
// (an unsynced one has no state to give), within the rate; one of each at
// a time. Requests refused for the rate are counted.
func (d *device) stateAdmit(m *nats.Msg) bool {
	if m.Subject == d.sb.applySubj {
		return d.sb.applyQueued.CompareAndSwap(false, true) // else the next try brings another
	}
	if !d.sb.synced.Load() || m.Reply == "" {
		return false
	}
	now := time.Now().UnixNano()
	if now-d.sb.lastRequest.Load() < int64(stateEvery) || !d.sb.requestQueued.CompareAndSwap(false, true) {
		d.reject("state_request_limited", 1, "a standby's state request refused: one answered per "+stateEvery.String())
		return false
	}
	d.sb.lastRequest.Store(now)
	return true
}

// stateDone releases a state message's place in its budget.
func (d *device) stateDone(m *nats.Msg) {
	if m.Subject == d.sb.applySubj {
		d.sb.applyQueued.Store(false)
	} else {
		d.sb.requestQueued.Store(false)
	}
}

// standbyMsg handles a state request or a received state (processor
// goroutine).
func (d *device) standbyMsg(m *nats.Msg) {
	switch m.Subject {
	case d.sb.snapSubj:
		if !d.sb.synced.Load() || m.Reply == "" {
			return
		}
		b, err := json.Marshal(d.core.Snapshot())
		if err == nil {
			err = m.Respond(b)
		}
		if err != nil {
			d.s.limiter.warn(&d.s.log, d.name+"/standby", 1, "answer a standby's state request: "+err.Error(), devField(d.name))
		}
	case d.sb.applySubj:
		if d.sb.synced.Load() {
			return
		}
		if err := d.restore(m.Data); err != nil {
			d.s.limiter.warn(&d.s.log, d.name+"/standby", 1, "holder's state not usable yet: "+err.Error(), devField(d.name))
			return
		}
		d.sb.synced.Store(true) // only once the replay completed
		d.sb.restores.Add(1)
		d.s.log.Info().Str("device", d.name).Int64("last_seq", d.core.LastSeq()).Uint32("epoch", d.core.Epoch()).
			Msg("standby: caught up with the holder's state")
	}
}

// restore replaces the core's state by the holder's and replays the
// retained messages that followed it. The state lies between two frames
// messages: the retained frames after it are replayed (frames within the
// state skipped); a control message retained next to that point may or
// may not be in the state, so the state is refused and a later one
// awaited. A replay that fails (a panic in the core) is an error: the
// instance stays unsynced and takes the next state.
func (d *device) restore(data []byte) (err error) {
	var snap daemon.Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	last := snap.Last
	if !snap.Started {
		last = -1
	}
	before, after := -1, len(d.sb.retained) // last frames message within the state, first past it
	for i, m := range d.sb.retained {
		if m.Subject != d.stimSubj {
			continue
		}
		fs, n, err := stream.PeekFrames(m.Data)
		if err != nil {
			continue
		}
		if !snap.Started || fs+int64(n)-1 > last {
			if fs > last+1 && snap.Started {
				return fmt.Errorf("state at seq %d, the retained frames go on at %d", last, fs)
			}
			after = i
			break
		}
		before = i
	}
	for _, m := range d.sb.retained[before+1 : after] {
		if m.Subject == d.ctlSubj {
			return errors.New("a control message arrived next to the state's last frame")
		}
	}
	if after == len(d.sb.retained) && before+1 < after {
		return errors.New("control messages arrived after the state's last frame")
	}
	if err := d.core.Restore(&snap); err != nil {
		return err
	}
	d.sb.gate.ResetPos()
	d.sb.replaying = true // the replayed decisions go through the gate
	defer func() {
		d.sb.replaying = false
		if r := recover(); r != nil {
			err = fmt.Errorf("replay of the retained messages failed: %v", r)
		}
	}()
	var f stream.Frames
	var c stream.Control
	for _, m := range d.sb.retained[after:] {
		switch m.Subject {
		case d.stimSubj:
			if err := stream.DecodeFrames(m.Data, &f); err != nil {
				continue
			}
			if snap.Started && f.FirstSeq <= last {
				within := last + 1 - f.FirstSeq
				if within >= int64(len(f.Frames)) {
					continue // every frame within the state (resent)
				}
				f.Frames = f.Frames[within:]
				f.FirstSeq = last + 1
			}
			d.core.Frames(&f, 0)
		case d.ctlSubj:
			if err := stream.DecodeControl(m.Data, &c); err == nil {
				d.core.Control(&c)
			}
		}
	}
	d.sb.retained, d.sb.retainedBytes = nil, 0
	d.last.Store(d.core.LastSeq())
	d.epoch.Store(d.core.Epoch())
	d.first.Store(d.core.First())
	d.s.m.epoch.WithLabelValues(d.name).Set(float64(d.core.Epoch()))
	return nil
}

// A reload reaches each replica at a frame of its own: replicas would
// serve different models from different frames, and a recording could not
// be audited across them. So a standby group refuses it: a new model means
// restarting the group.
var errStandbyReload = errors.New("reload refused in a hot-standby group: replicas must serve the same model from the same frame; " +
	"restart the group's instances with the new checkpoint (docs/operations.md, \"Hot standby\")")

// groupResetLead is how many frames past the holder's receive edge a reset
// requested by an operator applies: a window, about a second of a
// real-time stream, so that the announcement reaches every replica and the
// recording before that frame does (even behind a frames message of
// stream.MaxFramesPerMsg frames in flight).
const groupResetLead = rgc.WindowBins

// groupReset makes an operator's reset a group event: the holder announces
// on the device's control subject a reset at a frame past its receive
// edge (stream.OpResetAt), which every replica and the recording receive
// and apply before that frame; a standby announces nothing and waits for
// the holder's. It returns the frame announced (-1 on a standby), or an
// error code and message for the request.
func (d *device) groupReset() (at int64, code, msg string) {
	epoch, first := d.epoch.Load(), d.first.Load()
	if first < 0 {
		return -1, codeBadRequest, "no stream runs for " + d.name + ": nothing to reset (the next frame starts a new stream)"
	}
	if !d.sb.state.lease.Held() {
		return -1, "", ""
	}
	at = min(max(d.last.Load(), first)+max(d.queuedFrames.Load(), 0)+groupResetLead, stream.MaxSeq)
	payload, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpResetAt, Epoch: epoch, At: at})
	if err == nil {
		err = d.nc.Publish(d.ctlSubj, payload)
	}
	if err != nil {
		return -1, codeUnavailable, "announce the reset on " + d.ctlSubj + ": " + err.Error()
	}
	d.s.log.Info().Str("device", d.name).Uint32("epoch", epoch).Int64("at", at).
		Msg("reset requested over NATS: announced to the group on the control subject")
	return at, "", ""
}

// standbyDiverged handles a replica whose core applied a group event at a
// frame of its own (a reset announced too late for it): its state is no
// longer the group's, so it may not take over until it caught up again
// from a synced instance's state.
func (d *device) standbyDiverged() {
	if !d.sb.on || d.sb.state == nil || d.sb.state.resync == nil || d.sb.state.lease.Held() {
		return
	}
	if d.sb.synced.CompareAndSwap(true, false) {
		d.s.log.Warn().Str("device", d.name).Msg("standby: state differs from the group's: catching up again from a synced instance")
		d.sb.state.resync(d)
	}
}

// standbyOn reports whether the service is an instance of a hot-standby
// group.
func (s *Service) standbyOn() bool { return len(s.devices) > 0 && s.devices[0].sb.on }

// EnableStandby makes the service one instance of the hot-standby group
// cfg.Group on nc (the connection later given to Run): it opens the lease
// bucket, gates every device's decisions and stream events, observes the
// holder's, and runs the lease until stop is called; call stop after Run
// returned, so the drained decisions go out before the lease is released.
// An instance that finds another holder catches up with the holder's state
// before it may take over. Call it before Run.
func (s *Service) EnableStandby(ctx context.Context, nc *nats.Conn, cfg StandbyConfig) (stop func(), err error) {
	if cfg.Group == "" {
		return nil, errors.New("service: standby without a group name")
	}
	if err := stream.CheckDevice(cfg.Group); err != nil {
		return nil, fmt.Errorf("service: standby group: %w", err)
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuid.Next()[:6]
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultStandbyBucket
	}
	if cfg.TTL <= 0 {
		cfg.TTL = standby.DefaultTTL
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 14
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = 250 * time.Millisecond
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("service: standby: %w", err)
	}
	kv, err := standby.LeaseBucket(ctx, js, cfg.Bucket, cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	// Any holder (even one with this instance's id: another process, or
	// this one's predecessor) means a stream may be running: catch up
	// first.
	late := false
	if _, err := kv.Get(ctx, cfg.Group); err == nil {
		late = true
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("service: standby: read lease: %w", err)
	}
	// Replicas must take the same decisions, and match their messages by
	// the frame that produced them (standby.Pos). Skipping decisions under
	// overload, gathering windows while behind and handing a call's
	// decisions over as its windows are computed all depend on each
	// instance's own timing, so replicas do none of them: an overloaded
	// group answers late rather than differently, and each call's
	// decisions go out whole.
	for _, d := range s.devices {
		d.core.SetGather(0)
		d.core.SetMaxLag(0)
		d.core.SetWholeCalls(true)
	}
	if s.cfg.MaxLag > 0 {
		s.log.Warn().Int64("max_lag", s.cfg.MaxLag).Msg("standby: replicas never skip decisions: --max-lag is off in a standby group")
	}
	st := &standbyState{cfg: cfg}
	eligible := func() bool {
		for _, d := range s.devices {
			if !d.sb.synced.Load() {
				return false
			}
		}
		return true
	}
	// A processor inside one message for a whole TTL has stalled (a hung
	// model call; a slow one only delays, and a standby would be as slow):
	// the holder stops renewing, and a standby takes over.
	progressing := func() bool {
		now := time.Now().UnixNano()
		for _, d := range s.devices {
			if t := d.handling.Load(); t != 0 && now-t > int64(cfg.TTL) {
				return false
			}
		}
		return true
	}
	recreate := func(ctx context.Context) (jetstream.KeyValue, error) {
		return standby.LeaseBucket(ctx, js, cfg.Bucket, cfg.TTL)
	}
	lease, err := standby.NewLease(standby.LeaseConfig{KV: kv, Key: cfg.Group, Holder: cfg.ID, TTL: cfg.TTL, Eligible: eligible,
		Healthy: progressing, Recreate: recreate,
		OnGain: func() {
			for _, d := range s.devices {
				if err := d.sb.gate.Gain(); err != nil {
					s.log.Warn().Err(err).Str("device", d.name).Msg("standby: publish kept decisions at takeover")
				}
			}
			s.log.Warn().Str("group", cfg.Group).Str("id", cfg.ID).Msg("standby: this instance holds the lease and publishes")
		},
		OnLoss: func() {
			for _, d := range s.devices {
				d.sb.gate.Lose()
			}
			s.log.Warn().Str("group", cfg.Group).Str("id", cfg.ID).Msg("standby: this instance no longer holds the lease (lost or released) and stops publishing")
		}})
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	st.lease = lease
	var subs []*nats.Subscription
	unsubscribe := func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}
	scope := standby.Scope(cfg.Group, s.cfg.Shard, s.cfg.Shards)
	for _, d := range s.devices {
		g, err := standby.NewGate(standby.NATSPublisher(nc, scope, lease.Revision), lease.Held, cfg.Buffer)
		if err != nil {
			unsubscribe()
			return nil, fmt.Errorf("service: %w", err)
		}
		d.sb.gate = g
		d.sb.snapSubj = "rgcpred.standby." + cfg.Group + "." + d.name + ".state"
		d.sb.applySubj = d.sb.snapSubj + ".apply"
		d.sb.synced.Store(!late)
		obs, err := standby.ObserveNATS(nc, g, scope, func(err error) {
			s.limiter.warn(&s.log, d.name+"/standby", 1, err.Error(), devField(d.name))
		}, stream.SpikesSubject(d.name), d.eventSubj)
		if err != nil {
			unsubscribe()
			return nil, fmt.Errorf("service: %w", err)
		}
		subs = append(subs, obs...)
		sub, err := nc.ChanSubscribe(d.sb.snapSubj, d.raw)
		if err != nil {
			unsubscribe()
			return nil, fmt.Errorf("service: standby: subscribe %s: %w", d.sb.snapSubj, err)
		}
		subs = append(subs, sub)
		d.sb.state = st
		d.sb.on = true
	}
	if err := s.reg.Register(&standbyCollector{s: s, st: st}); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("service: standby metrics: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		lease.Run(lctx, func(err error) { s.limiter.warn(&s.log, "standby/lease", 1, err.Error()) })
	}()
	var wgMu sync.Mutex // wg.Add after stop's Wait began would race
	st.resync = func(d *device) {
		wgMu.Lock()
		defer wgMu.Unlock()
		if lctx.Err() != nil {
			return
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.catchUp(lctx, nc, lease, cfg.Group, cfg.TTL, cfg.SyncEvery) }()
	}
	for _, d := range s.devices {
		if !d.sb.synced.Load() {
			st.resync(d)
		}
	}
	s.log.Info().Str("group", cfg.Group).Str("id", cfg.ID).Str("incarnation", lease.Incarnation()).Dur("ttl", cfg.TTL).
		Bool("catching_up", late).Msg("hot standby enabled")
	var once sync.Once
	st.stop = func() {
		once.Do(func() {
			wgMu.Lock()
			cancel()
			wgMu.Unlock()
			wg.Wait()
			unsubscribe()
		})
	}
	return st.stop, nil
}

// catchUp asks the group for the device's state every period until the
// processor has restored one. When the lease stays free for two TTLs (the
// holder died and no synced standby took over), nobody can answer: the
// instance goes on from its own state, and says so.
func (d *device) catchUp(ctx context.Context, nc *nats.Conn, lease *standby.Lease, group string, ttl, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	var free time.Time
	for !d.sb.synced.Load() {
		rctx, cancel := context.WithTimeout(ctx, period)
		m, err := nc.RequestWithContext(rctx, d.sb.snapSubj, nil)
		cancel()
		gctx, cancel := context.WithTimeout(ctx, period)
		if err == nil {
			select {
			case d.raw <- &nats.Msg{Subject: d.sb.applySubj, Data: m.Data}:
			default:
			}
		} else if _, gerr := lease.KV().Get(gctx, group); errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted) {
			if free.IsZero() {
				free = time.Now()
			}
			if time.Since(free) > 2*ttl {
				d.sb.synced.Store(true)
				d.s.log.Warn().Str("device", d.name).Str("group", group).
					Msg("standby: no instance to catch up from and the lease is free: going on from this instance's own state")
			}
		} else {
			free = time.Time{}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// StandbyStatus reports the hot-standby lease's state, false without
// standby.
func (s *Service) StandbyStatus() (standby.LeaseStatus, bool) {
	if !s.standbyOn() {
		return standby.LeaseStatus{}, false
	}
	return s.devices[0].sb.state.lease.Status(), true
}

// standbyCollector exports the hot-standby state: who holds the lease,
// each device's sync state and its gate's counters.
type standbyCollector struct {
	s  *Service
	st *standbyState
}

var (
	standbyHolderDesc = prometheus.NewDesc("predictord_standby_holder",
		"1 while this instance holds its replica group's lease and publishes, else 0.", []string{"group", "id"}, nil)
	standbyTakeoversDesc = prometheus.NewDesc("predictord_standby_takeovers_total",
		"Times this instance took its replica group's lease.", []string{"group"}, nil)
	standbySyncedDesc = prometheus.NewDesc("predictord_standby_synced",
		"1 once the device's state is the group's (it may take over), else 0.", []string{"device"}, nil)
	standbyMessagesDesc = prometheus.NewDesc("predictord_standby_messages_total",
		"Decision and event messages by fate: published, held (kept as standby), flushed (kept, then published at a takeover), matched (kept, then dropped: the holder's copy seen), overflow (kept, then dropped from a full standby buffer), discarded (kept, then dropped at a takeover as already published; non-zero is a loss), suppressed (not kept: already published).",
		[]string{"device", "fate"}, nil)
	standbyIgnoredDesc = prometheus.NewDesc("predictord_standby_ignored_total",
		"Positions observed on the device's decision and event subjects and ignored: ahead (implausibly far ahead of this instance's own: forged, or this instance trails far behind), foreign (another group or shard, or none).",
		[]string{"device", "reason"}, nil)
)

func (c *standbyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- standbyHolderDesc
	ch <- standbyTakeoversDesc
	ch <- standbySyncedDesc
	ch <- standbyMessagesDesc
	ch <- standbyIgnoredDesc
}

func (c *standbyCollector) Collect(ch chan<- prometheus.Metric) {
	ls := c.st.lease.Status()
	held := 0.0
	if ls.Held {
		held = 1
	}
	ch <- prometheus.MustNewConstMetric(standbyHolderDesc, prometheus.GaugeValue, held, c.st.cfg.Group, c.st.cfg.ID)
	ch <- prometheus.MustNewConstMetric(standbyTakeoversDesc, prometheus.CounterValue, float64(ls.Gains), c.st.cfg.Group)
	for _, d := range c.s.devices {
		synced := 0.0
		if d.sb.synced.Load() {
			synced = 1
		}
		ch <- prometheus.MustNewConstMetric(standbySyncedDesc, prometheus.GaugeValue, synced, d.name)
		gs := d.sb.gate.Stats()
		for _, f := range []struct {
			fate string
			n    uint64
		}{{"published", gs.Published}, {"held", gs.Held}, {"flushed", gs.Flushed}, {"matched", gs.Matched}, {"overflow", gs.Overflow},
			{"discarded", gs.Discarded}, {"suppressed", gs.Suppressed}} {
			ch <- prometheus.MustNewConstMetric(standbyMessagesDesc, prometheus.CounterValue, float64(f.n), d.name, f.fate)
		}
		ch <- prometheus.MustNewConstMetric(standbyIgnoredDesc, prometheus.CounterValue, float64(gs.Ahead), d.name, "ahead")
		ch <- prometheus.MustNewConstMetric(standbyIgnoredDesc, prometheus.CounterValue, float64(gs.Foreign), d.name, "foreign")
	}
}
