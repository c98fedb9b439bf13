// Package service runs predictord's cores (package daemon) over NATS: it
// subscribes to each served device's stimulus and control subjects, feeds
// the messages in arrival order to the device's core, publishes the
// decisions, answers status requests (binary, docs/protocol.md), registers
// the NATS micro service "predictord" with JSON status and control
// endpoints (micro.go), and exposes Prometheus metrics,
// /healthz and /readyz. The wire protocol and the robustness and overload
// rules are in docs/protocol.md.
//
// Per device, two goroutines: a reader stamps each message's arrival,
// tracks the newest frame seq received (the overload policy's lag) and
// queues the message; a processor decodes and applies it. The queue is
// bounded; when it is full, messages are dropped and counted (the lost
// frames become a gap).
package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/base/msgauth"
	"rgcpred/base/rt"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// Model is a loaded checkpoint ready to serve.
type Model struct {
	// Predictor computes the class distributions.
	Predictor rgc.Predictor
	// Cells holds every cluster id the checkpoint knows.
	Cells []int
	// MaxBatch is the largest batch Predictor accepts (0: any).
	MaxBatch int
	// Name describes the model in logs (configuration, provenance).
	Name string
	// Close, if not nil, releases the predictor (called after a reload
	// replaced it, and by Service.Close).
	Close func() error
	// BinRateHz is the bin rate of the checkpoint's training data; it must
	// equal the stream's, rgc.BinRateHz (0: the loader does not know it, not
	// checked).
	BinRateHz float64
	// WindowBins and Horizon are the checkpoint's window and prediction
	// horizon in bins; they must equal rgc.WindowBins and rgc.Horizon (0:
	// not stated, not checked).
	WindowBins, Horizon int
	// StimMode is the stimulus mode the checkpoint was trained on; it must
	// equal the frames', Config.StimMode.
	StimMode rgc.StimMode
	// Gather is the number of windows the predictor computes in parallel
	// (the engine's threads): when a device's core is behind it gathers
	// that many due windows into one call (daemon.Config.Gather). 0 or 1:
	// no gathering. The value of the model loaded at start is used.
	Gather int
}

// Loader loads the checkpoint at path for batches of at most maxBatch
// windows (0: the loader picks, at least every cell of the checkpoint).
// Its errors name the file they concern (the service does not repeat it).
type Loader func(path string, maxBatch int) (*Model, error)

// Config configures a Service.
type Config struct {
	// Devices are the device names served (each a NATS subject token).
	Devices []string
	// ModelPath is the checkpoint, loaded by Load at start and on Reload.
	ModelPath string
	// Load loads checkpoints.
	Load Loader
	// Cells restricts the served cells to these cluster ids (all of the
	// checkpoint's when empty).
	Cells []int
	// Shard and Shards split the cells between daemons: this one serves the
	// cells whose index in the sorted cell list satisfies index % Shards ==
	// Shard. Shards 0 means 1.
	Shard, Shards int
	// Stagger staggers the cells' first windows over one horizon
	// (daemon.Config.Stagger, rollout.StartOffset over the whole cell list
	// before sharding); false starts them all at first + 1023.
	Stagger bool
	// Gather is the number of due windows a device's core gathers into one
	// model call while frames wait (daemon.Config.Gather): 0 takes the
	// model's (Model.Gather, the engine's threads), a negative value turns
	// gathering off.
	Gather int
	// MaxBatch bounds the windows per Predict call (0: all due cells).
	MaxBatch int
	// MaxLag is the overload threshold in bins (daemon.Config.MaxLag).
	MaxLag int64
	// ResendWait is how long a device's core waits for the frames of a
	// gap it asked the device to resend (daemon.Config.ResendWait;
	// docs/protocol.md, "Resend"); 0: gaps are filled at once.
	ResendWait time.Duration
	// StimMode is the stimulus mode of the frames the devices send
	// (predictord --stim); a model trained on another is refused.
	StimMode rgc.StimMode
	// PublishSilence also publishes "no spike" decisions.
	PublishSilence bool
	// Keys turns on message authentication (docs/protocol.md,
	// "Authentication"): every served device needs its keys; frames and
	// control messages without a valid authenticator under its Up key are
	// refused, decisions and events are signed with its Down key. nil:
	// off.
	Keys msgauth.Keys
	// StandbyKeys are the hot-standby groups' keys (msgauth.KeyFile.Groups):
	// with Keys, EnableStandby needs its group's, with which the instances
	// sign lease values, states, digests and the group's reset
	// announcements.
	StandbyKeys map[string][]byte
	// Policy turns each window's distribution into a decision
	// (daemon.Config.Policy; nil: the median rule).
	Policy rollout.Policy
	// QueueLen is the number of frames messages queued per device (default
	// 8192); control messages have a budget of their own.
	QueueLen int
	// QueueBytes bounds the bytes of the frames messages queued per device
	// (default 16 MiB: 8192 messages of 85 frames).
	QueueBytes int64
	// LogEvery is the minimum time between two log lines of one kind of
	// bad input (default 5 s); the lines in between are counted.
	LogEvery time.Duration
	// Log receives the service's logs.
	Log zerolog.Logger
	// NoExpect stops the cores announcing each frame's model call to the
	// model a frame ahead (rgc.Expecter): the engine's helper threads then
	// park between calls and wake when a call starts, which costs less CPU
	// and adds latency to every batch (docs/engine.md, "Expected calls").
	NoExpect bool
	// WholeCalls publishes a model call's decisions together when the call
	// ends, instead of each as soon as the engine has computed its window
	// (daemon.Config.WholeCalls): the first windows of a batch then wait
	// for its last.
	WholeCalls bool
	// Replica makes every device's core a replica of a hot-standby group
	// (daemon.Config.Replica): no gathering, no skipping (a MaxLag is
	// turned off, with a warning), whole calls. EnableStandby needs it.
	Replica bool
	// Timing, if not nil, hears when each decision's frames message
	// arrived, when its model call ran and when it was handed to NATS
	// (DecisionTiming; a hot standby's gate may still hold it back), from
	// the device's goroutine: the latency bench's
	// breakdown of the frame-to-decision latency (bench/cmd/latency
	// --trace). It must return quickly.
	Timing func(DecisionTiming)
	// Registry receives the metrics (a fresh one if nil).
	Registry *prometheus.Registry
	// PingInterval is how often the NATS client pings the server (default
	// 2 s); after MaxPingsOutstanding unanswered pings (default 3) the
	// connection counts as dead and is reconnected, so a half-open
	// connection ends /readyz's 200 within about their product.
	PingInterval time.Duration
	// MaxPingsOutstanding: see PingInterval.
	MaxPingsOutstanding int
	// StaleAfter makes /readyz answer 503 once a device that has sent
	// frames sent none for this long (0: never; a device that has not sent
	// any yet keeps the service ready).
	StaleAfter time.Duration
	// DrainTimeout bounds the drain after Run's context ends: past it Run
	// returns ErrDrainTimeout and abandons the messages still queued (0: no
	// limit).
	DrainTimeout time.Duration
	// RealTime, if not nil, runs the service in real-time mode
	// (docs/operations.md, "Real-time host"): Run applies it to the whole
	// process (rt.Apply: SCHED_FIFO on every thread, memory locked, CPUs
	// pinned), logs what it could not apply and serves on without it, and
	// each device's processor polls its queue instead of parking when the
	// next frame brings a due window (daemon.Core.PollFor). Run reverts the
	// process when it returns. Decisions are the same with and without it.
	RealTime *rt.Settings
	// MonitorEvery is the period of the monitor that updates the dropped
	// message counts, the ready gauge and the stale-input warnings
	// (default 1 s).
	MonitorEvery time.Duration
}

// ErrDrainTimeout is returned by Run when draining took longer than
// Config.DrainTimeout.
var ErrDrainTimeout = errors.New("drain timed out")

// subscription is one NATS subscription and the dropped-message count
// already exported for it.
type subscription struct {
	sub      *nats.Subscription
	dropped  prometheus.Counter
	exported int
}

// Service is a running predictord.
type Service struct {
	cfg     Config
	log     zerolog.Logger
	reg     *prometheus.Registry
	m       *metrics
	limiter *limiter

	pred    *combiner      // every device's cores call the model through it
	rec     *recording     // the flight recorder's session headers, nil when off
	group   *standby.Group // the hot-standby group, nil when off
	model   atomic.Pointer[Model]
	engine  *engineCollector // the engine's counters, across reloads
	known   []int
	all     []int // the whole cell list before sharding, ascending
	cells   []int
	devices []*device

	// groupAuth signs the group's reset announcements (Config.StandbyKeys;
	// nil without keys).
	groupAuth *stream.Auth

	maxBatch int // windows per Predict call of every core
	reloadMu sync.Mutex

	nc      atomic.Pointer[nats.Conn]
	running atomic.Bool
	// working is true while Run's reader and processor goroutines run
	// (after an abandoned drain too, until they end).
	working atomic.Bool

	subsMu sync.Mutex
	subs   []*subscription

	// microID is the micro service instance id while Run serves.
	microID atomic.Pointer[string]
}

// SelectCells returns the cells a daemon serves: the checkpoint's cells
// (known), restricted to filter when it is not empty, sorted (AllCells),
// then every cell whose index i satisfies i % shards == shard.
func SelectCells(known, filter []int, shard, shards int) ([]int, error) {
	if shards <= 0 {
		shards = 1
	}
	if shard < 0 || shard >= shards {
		return nil, fmt.Errorf("shard %d/%d: want 0 <= shard < shards", shard, shards)
	}
	all, err := AllCells(known, filter)
	if err != nil {
		return nil, err
	}
	var out []int
	for i, c := range all {
		if i%shards == shard {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("shard %d/%d of %d cells serves none", shard, shards, len(all))
	}
	return out, nil
}

// AllCells returns a device's whole cell list, shared by every shard: the
// checkpoint's cells (known), restricted to filter when it is not empty,
// ascending, each once.
func AllCells(known, filter []int) ([]int, error) {
	set := make(map[int]bool, len(known))
	for _, c := range known {
		set[c] = true
	}
	all := slices.Clone(known)
	if len(filter) > 0 {
		all = all[:0]
		for _, c := range filter {
			if !set[c] {
				return nil, fmt.Errorf("cell %d is not in the checkpoint", c)
			}
			all = append(all, c)
		}
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// New loads the model, chooses the cells and builds one core per device.
func New(cfg Config) (*Service, error) {
	if len(cfg.Devices) == 0 {
		return nil, errors.New("service: no devices")
	}
	if cfg.Load == nil {
		return nil, errors.New("service: no model loader")
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 1
	}
	if cfg.Shards > math.MaxUint16 {
		return nil, fmt.Errorf("service: %d shards exceed %d", cfg.Shards, math.MaxUint16)
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 8192
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = 16 << 20
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 5 * time.Second
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 2 * time.Second
	}
	if cfg.MaxPingsOutstanding <= 0 {
		cfg.MaxPingsOutstanding = 3
	}
	if cfg.MonitorEvery <= 0 {
		cfg.MonitorEvery = time.Second
	}
	if cfg.ResendWait < 0 {
		return nil, fmt.Errorf("service: negative resend wait %v", cfg.ResendWait)
	}
	if cfg.StaleAfter < 0 || cfg.DrainTimeout < 0 {
		return nil, fmt.Errorf("service: negative stale-after %v or drain timeout %v", cfg.StaleAfter, cfg.DrainTimeout)
	}
	if cfg.Replica {
		if cfg.MaxLag > 0 {
			cfg.Log.Warn().Int64("max_lag", cfg.MaxLag).Msg("standby: replicas never skip decisions: --max-lag is off in a standby group")
		}
		cfg.MaxLag, cfg.Gather = 0, -1
	}
	s := &Service{cfg: cfg, log: cfg.Log, reg: cfg.Registry}
	s.limiter = newLimiter(cfg.LogEvery)
	s.m = newMetrics(cfg.Registry, s.frameAges)
	s.engine = newEngineCollector(s.model.Load)
	cfg.Registry.MustRegister(s.engine)
	mdl, err := s.loadValid(nil)
	if err != nil {
		return nil, err
	}
	s.known = slices.Clone(mdl.Cells)
	if s.all, err = AllCells(mdl.Cells, cfg.Cells); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if len(s.all) > math.MaxUint16 {
		return nil, fmt.Errorf("service: %d cells exceed %d", len(s.all), math.MaxUint16)
	}
	if s.cells, err = SelectCells(mdl.Cells, cfg.Cells, cfg.Shard, cfg.Shards); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	maxBatch := cfg.MaxBatch
	if maxBatch <= 0 || maxBatch > len(s.cells) {
		maxBatch = len(s.cells)
	}
	if mdl.MaxBatch > 0 && maxBatch > mdl.MaxBatch {
		maxBatch = mdl.MaxBatch
	}
	s.maxBatch = maxBatch
	s.pred = newCombiner(mdl.Predictor)
	s.pred.noExpect = cfg.NoExpect
	s.model.Store(mdl)
	seen := map[string]bool{}
	for _, name := range cfg.Devices {
		if err := stream.CheckDevice(name); err != nil {
			return nil, fmt.Errorf("service: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("service: device %s listed twice", name)
		}
		seen[name] = true
		d, err := s.newDevice(name, maxBatch)
		if err == nil && cfg.Keys != nil {
			err = d.useKeys(cfg.Keys)
		}
		if err != nil {
			return nil, err
		}
		s.devices = append(s.devices, d)
		s.m.cells.WithLabelValues(name).Set(float64(len(s.cells)))
	}
	s.log.Info().Str("model", mdl.Name).Str("path", cfg.ModelPath).Int("cells", len(s.cells)).
		Int("checkpoint_cells", len(mdl.Cells)).Int("shard", cfg.Shard).Int("shards", cfg.Shards).
		Strs("devices", cfg.Devices).Int("max_batch", maxBatch).Int64("max_lag", cfg.MaxLag).Bool("stagger", cfg.Stagger).Msg("model loaded")
	return s, nil
}

// Close releases the current model. Call it after Run returned. After an
// abandoned drain (ErrDrainTimeout) whose goroutines still run, the model
// may be in use: Close leaves it open and returns an error.
func (s *Service) Close() error {
	if s.working.Load() {
		return errors.New("close model: left open, an abandoned drain may still be using it")
	}
	if m := s.model.Load(); m != nil && m.Close != nil {
		if err := m.Close(); err != nil {
			return fmt.Errorf("close model: %w", err)
		}
	}
	return nil
}

// Cells returns the cells this service serves.
func (s *Service) Cells() []int { return slices.Clone(s.cells) }

// Registry returns the service's metrics registry.
func (s *Service) Registry() *prometheus.Registry { return s.reg }

// ConnOptions returns the NATS options the service needs: reconnect
// forever, ping the server (Config.PingInterval) so that a dead connection
// is noticed, and log and count connection events. Add auth options to
// them.
func (s *Service) ConnOptions() []nats.Option {
	return []nats.Option{
		nats.PingInterval(s.cfg.PingInterval),
		nats.MaxPingsOutstanding(s.cfg.MaxPingsOutstanding),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(16 << 20),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // our own Close, logged by ClosedHandler
			}
			s.m.nats.WithLabelValues("disconnect").Inc()
			s.log.Warn().Err(err).Msg("nats disconnected; reconnecting (state kept)")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.m.nats.WithLabelValues("reconnect").Inc()
			s.log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			s.log.Info().Msg("nats connection closed")
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				s.m.nats.WithLabelValues("slow_consumer").Inc()
				s.syncDropped()
				s.limiter.warn(&s.log, "slow_consumer", 1, "nats dropped messages: slow consumer (the frames become a gap)")
				return
			}
			s.m.nats.WithLabelValues("error").Inc()
			s.log.Error().Err(err).Msg("nats error")
		}),
	}
}

// Run subscribes every device and processes messages until ctx ends; then
// it drains: it stops the subscriptions, processes every message already
// received, publishes the decisions, flushes the connection and returns nil.
// With Config.DrainTimeout, a drain that takes longer is abandoned (what is
// left is logged) and Run returns ErrDrainTimeout.
func (s *Service) Run(ctx context.Context, nc *nats.Conn) error {
	s.nc.Store(nc)
	defer s.enterRealTime()()
	var wg sync.WaitGroup
	var subs []*nats.Subscription
	fail := func(err error) error {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		s.setSubs(nil)
		return err
	}
	var tracked []*subscription
	track := func(d *device, sub *nats.Subscription) {
		subs = append(subs, sub)
		tracked = append(tracked, &subscription{sub: sub, dropped: s.m.dropped.WithLabelValues(d.name, sub.Subject)})
	}
	for _, d := range s.devices {
		d.nc = nc
		for _, subj := range []string{stream.StimSubject(d.name), stream.ControlSubject(d.name)} {
			sub, err := nc.ChanSubscribe(subj, d.raw)
			if err != nil {
				return fail(fmt.Errorf("subscribe %s: %w", subj, err))
			}
			track(d, sub)
		}
		if d.resend != nil {
			sub, err := nc.ChanSubscribe(d.resend.prefix+">", d.raw)
			if err != nil {
				return fail(fmt.Errorf("subscribe resend answers: %w", err))
			}
			subs = append(subs, sub) // not tracked: its subject is random, no metric label

		}
		sub, err := nc.Subscribe(stream.StatusSubject(d.name), d.status)
		if err != nil {
			return fail(fmt.Errorf("subscribe %s: %w", stream.StatusSubject(d.name), err))
		}
		track(d, sub)
	}
	s.setSubs(tracked)
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn().Err(err).Msg("flush after subscribing (continuing; NATS will resend subscriptions on reconnect)")
	}
	ms, err := s.startMicro(nc)
	if err != nil {
		return fail(err)
	}
	s.working.Store(true)
	for _, d := range s.devices {
		wg.Add(2)
		go func() { defer wg.Done(); d.read() }()
		go func() { defer wg.Done(); d.process() }()
	}
	workDone := make(chan struct{})
	go func() {
		wg.Wait()
		s.working.Store(false)
		close(workDone)
	}()
	s.running.Store(true)
	s.m.ready.Set(1)
	monStop, monDone := make(chan struct{}), make(chan struct{})
	go s.monitor(monStop, monDone)
	s.log.Info().Strs("devices", s.cfg.Devices).Str("url", nc.ConnectedUrlRedacted()).Str("micro_id", s.MicroID()).
		Dur("stale_after", s.cfg.StaleAfter).Dur("drain_timeout", s.cfg.DrainTimeout).Msg("serving")

	<-ctx.Done()
	if err := ms.Stop(); err != nil {
		s.log.Warn().Err(err).Msg("stop the micro service")
	}
	close(monStop)
	<-monDone
	s.running.Store(false)
	s.m.ready.Set(0)
	s.log.Info().Msg("draining")
	s.syncDropped() // Dropped needs a live subscription
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	s.setSubs(nil)
	for _, d := range s.devices {
		close(d.stop)
	}
	var timeout <-chan time.Time
	if s.cfg.DrainTimeout > 0 {
		t := time.NewTimer(s.cfg.DrainTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-workDone:
	case <-timeout:
		for _, d := range s.devices {
			s.log.Error().Str("device", d.name).Int("queued_messages", len(d.raw)+len(d.work)).
				Int64("last_seq", d.last.Load()).Int64("queued_frames", d.queuedFrames.Load()).
				Msg("drain timeout: abandoning the queued messages and the model call in progress; their decisions are not published")
		}
		return fmt.Errorf("%w after %v", ErrDrainTimeout, s.cfg.DrainTimeout)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn().Err(err).Msg("flush while draining")
	}
	var frames uint64
	for _, d := range s.devices {
		frames += d.core.Stats().Frames
	}
	s.log.Info().Uint64("frames", frames).Msg("drained")
	return nil
}

// setSubs replaces the subscriptions whose dropped messages are counted.
func (s *Service) setSubs(subs []*subscription) {
	s.subsMu.Lock()
	s.subs = subs
	s.subsMu.Unlock()
}

// syncDropped adds the messages the NATS client dropped on each
// subscription since the last call to predictord_nats_dropped_messages_total.
func (s *Service) syncDropped() {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for _, t := range s.subs {
		n, err := t.sub.Dropped()
		if err != nil || n <= t.exported {
			continue
		}
		t.dropped.Add(float64(n - t.exported))
		t.exported = n
	}
}

// monitor runs every Config.MonitorEvery until stop is closed: it updates
// the dropped message counts and the ready gauge, and warns once when a
// device's frames stop for longer than Config.StaleAfter (and notes when
// they resume).
func (s *Service) monitor(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.MonitorEvery)
	defer t.Stop()
	stale := make([]bool, len(s.devices))
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.syncDropped()
		if s.Ready() {
			s.m.ready.Set(1)
		} else {
			s.m.ready.Set(0)
		}
		if s.cfg.StaleAfter <= 0 {
			continue
		}
		for i, d := range s.devices {
			age, ok := d.frameAge()
			switch now := ok && age > s.cfg.StaleAfter; {
			case now && !stale[i]:
				s.log.Warn().Str("device", d.name).Dur("stale_after", s.cfg.StaleAfter).
					Msgf("no frames from device %s for %.1f s: not ready", d.name, age.Seconds())
			case !now && stale[i]:
				s.log.Info().Str("device", d.name).Msg("frames arrive again")
			}
			stale[i] = ok && age > s.cfg.StaleAfter
		}
	}
}
