package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/model/engine"
	"rgcpred/rollout"
	"rgcpred/serve/jsstart"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
)

// JetStreamFeatures are predictord's opt-in features that need NATS
// JetStream; the zero value enables none (the default single instance needs
// no JetStream).
type JetStreamFeatures struct {
	// Standby makes this instance one of a hot-standby group (off when
	// Standby.Group is empty; the service needs Config.Replica).
	Standby standby.GroupConfig
	// Record records every served device's frames, control messages,
	// decisions and stream events in a stream (off when Record.Stream is
	// empty; Record.Devices defaults to the served devices).
	Record recorder.Config
}

// EnableJetStream turns on the features of f on nc (the connection later
// given to Run). Call it before Run, and the returned stop after Run
// returned (it releases the standby lease once the drained decisions are
// out).
func (s *Service) EnableJetStream(ctx context.Context, nc *nats.Conn, f JetStreamFeatures) (stop func(), err error) {
	stopRec, stopStandby := func() {}, func() {}
	if f.Record.Stream != "" {
		if stopRec, err = s.startRecording(ctx, nc, f.Record); err != nil {
			return nil, jetStreamHint(err)
		}
	}
	if f.Standby.Group != "" {
		if stopStandby, err = s.EnableStandby(ctx, nc, f.Standby); err != nil {
			stopRec()
			return nil, jetStreamHint(err)
		}
	}
	if s.rec != nil {
		if err := s.rec.fill(); err != nil {
			stopStandby()
			stopRec()
			return nil, err
		}
	}
	return func() { stopStandby(); stopRec() }, nil
}

// jetStreamHint adds the likely cause to the error of a server without
// JetStream.
func jetStreamHint(err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w (the NATS server has no JetStream: run it with -js, or give the embedded server --jetstream-dir)", err)
	}
	return err
}

// startRecording creates (or updates) the recording stream and stores
// each device's session header, which an audit (recorder.Audit) reads to
// re-run the session the same way; the header goes out again at each
// stream event and reload (recording.due) until stop is called.
func (s *Service) startRecording(ctx context.Context, nc *nats.Conn, cfg recorder.Config) (stop func(), err error) {
	if len(cfg.Devices) == 0 {
		cfg.Devices = s.cfg.Devices
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("service: record: %w", err)
	}
	st, placed, err := recorder.Open(ctx, js, cfg, jsstart.DefaultWait, func(err error) {
		s.startRetried("record", "flight recorder: the stream does not answer yet ("+jsstart.Reason(err)+"), trying again: ", err)
	})
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if err := s.reg.Register(&recordReplicasCollector{stream: cfg.Stream, placed: placed}); err != nil {
		return nil, fmt.Errorf("service: record: metrics: %w", err)
	}
	replicas := st.CachedInfo().Config.Replicas
	r := &recording{s: s, js: js, pending: make(chan string, 1), started: time.Now().UTC()}
	for _, d := range cfg.Devices {
		if slices.Contains(s.cfg.Devices, d) { // else recorded, but served by another daemon
			r.devices = append(r.devices, d)
		}
	}
	for _, d := range r.devices {
		if err := r.write(ctx, d); err != nil {
			return nil, err
		}
	}
	if cfg.MaxBytes == 0 || cfg.MaxAge == 0 {
		s.log.Warn().Str("stream", cfg.Stream).Int64("max_bytes", cfg.MaxBytes).Dur("max_age", cfg.MaxAge).
			Msg("flight recorder without a size or an age limit: the stream grows until the server's storage is full (--record-max-bytes, --record-max-age)")
	}
	if placed.Have < placed.Want {
		s.log.Warn().Str("stream", cfg.Stream).Int("replicas", placed.Have).Int("wanted", placed.Want).Str("reason", placed.Reason()).AnErr("answer", placed.Short).
			Msgf("flight recorder: the stream has fewer replicas than wanted: the cluster did not place %d within %v "+
				"(fewer nodes than that, or not all current); a later start raises them, never lowers them", placed.Want, jsstart.DefaultWait)
	}
	s.log.Info().Str("stream", cfg.Stream).Strs("devices", cfg.Devices).Int64("max_bytes", cfg.MaxBytes).
		Dur("max_age", cfg.MaxAge).Int("replicas", replicas).Msg("flight recorder on: frames, control, decisions and events go to the stream, replicated on as many nodes as the cluster allows (up to 3)")
	if err := r.logFills(nc); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.ctx, r.cfg = rctx, cfg
	done := make(chan struct{})
	go func() { defer close(done); r.run(rctx) }()
	s.rec = r
	return func() {
		cancel()
		<-done
		if r.filling != nil {
			<-r.filling
		}
		r.stopFills()
	}, nil
}

// fill starts the fillers (recording.startFills) on the recording's
// context.
func (r *recording) fill() error {
	var err error
	r.filling, err = r.startFills(r.ctx, r.js, r.cfg)
	return err
}

// recording re-publishes the session headers of the recorded devices, so
// that a recording whose oldest messages went (age or size limits) still
// holds the header of what follows, and a reload's new model is named.
type recording struct {
	s       *Service
	js      jetstream.JetStream
	devices []string
	started time.Time
	// ctx ends with the recording; cfg configures it. fills logs the
	// devices' messages and stores again what the stream lacks; filling
	// is closed once its fillers returned (nil before they started).
	ctx     context.Context
	cfg     recorder.Config
	fills   *fills
	filling <-chan struct{}
	// mu guards dueSet; pending wakes run.
	mu      sync.Mutex
	dueSet  map[string]bool
	pending chan string
}

// due asks for device's session header again ("" every device's); it never
// blocks and does nothing on a nil recording (recorder off).
func (r *recording) due(device string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.dueSet == nil {
		r.dueSet = map[string]bool{}
	}
	r.dueSet[device] = true
	r.mu.Unlock()
	select {
	case r.pending <- device:
	default:
	}
}

// run writes the session headers due until ctx ends.
func (r *recording) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.pending:
		}
		r.mu.Lock()
		due := r.dueSet
		r.dueSet = nil
		r.mu.Unlock()
		for _, d := range r.devices {
			if !due[d] && !due[""] {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := r.write(wctx, d); err != nil && ctx.Err() == nil {
				r.s.limiter.warn(&r.s.log, d+"/record", 1, "flight recorder: session header not stored: "+err.Error(), devField(d))
			}
			cancel()
		}
	}
}

// write stores device's session header, describing the model served now.
func (r *recording) write(ctx context.Context, device string) error {
	s := r.s
	name, prec := s.cfg.ModelPath, ""
	if m := s.model.Load(); m != nil {
		if m.Name != "" {
			name = m.Name + " (" + s.cfg.ModelPath + ")"
		}
		prec = engine.ArithmeticOf(m.Predictor)
	}
	err := recorder.WriteSession(ctx, r.js, device, recorder.Session{Model: name, Cells: slices.Clone(s.cells),
		All: slices.Clone(s.all), Stagger: s.cfg.Stagger, PublishSilence: s.cfg.PublishSilence,
		MaxLag: s.cfg.MaxLag, Policy: policyName(s.cfg.Policy), Precision: prec, BinPeriod: BinPeriod, Authenticated: s.cfg.Keys != nil, Started: r.started})
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	return nil
}

// policyName is the spike policy as rollout.ParsePolicy reads it.
func policyName(p rollout.Policy) string {
	if p == nil {
		return rollout.Median{}.String()
	}
	return p.String()
}
