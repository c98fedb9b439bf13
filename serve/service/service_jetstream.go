package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/model/engine"
	"rgcpred/rollout"
	"rgcpred/serve/recorder"
)

// JetStreamFeatures are predictord's opt-in features that need NATS
// JetStream; the zero value enables none (the default single instance needs
// no JetStream).
type JetStreamFeatures struct {
	// Standby makes this instance one of a hot-standby group (off when
	// Standby.Group is empty).
	Standby StandbyConfig
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
	stop = func() {}
	if f.Record.Stream != "" {
		if err := s.startRecording(ctx, nc, f.Record); err != nil {
			return nil, jetStreamHint(err)
		}
	}
	if f.Standby.Group != "" {
		if stop, err = s.EnableStandby(ctx, nc, f.Standby); err != nil {
			return nil, jetStreamHint(err)
		}
	}
	return stop, nil
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
// re-run the session the same way.
func (s *Service) startRecording(ctx context.Context, nc *nats.Conn, cfg recorder.Config) error {
	if len(cfg.Devices) == 0 {
		cfg.Devices = s.cfg.Devices
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("service: record: %w", err)
	}
	if _, err := recorder.Ensure(ctx, js, cfg); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	name, prec := s.cfg.ModelPath, ""
	if m := s.model.Load(); m != nil {
		if m.Name != "" {
			name = m.Name + " (" + s.cfg.ModelPath + ")"
		}
		prec = string(engine.PrecisionOf(m.Predictor))
	}
	for _, d := range cfg.Devices {
		if !slices.Contains(s.cfg.Devices, d) {
			continue // recorded, but served by another daemon
		}
		err := recorder.WriteSession(ctx, js, d, recorder.Session{Model: name, Cells: slices.Clone(s.cells),
			All: slices.Clone(s.all), Stagger: s.cfg.Stagger, PublishSilence: s.cfg.PublishSilence,
			MaxLag: s.cfg.MaxLag, Policy: policyName(s.cfg.Policy), Precision: prec, Started: time.Now().UTC()})
		if err != nil {
			return fmt.Errorf("service: %w", err)
		}
	}
	s.log.Info().Str("stream", cfg.Stream).Strs("devices", cfg.Devices).Int64("max_bytes", cfg.MaxBytes).
		Dur("max_age", cfg.MaxAge).Msg("flight recorder on: frames, control, decisions and events go to the stream")
	return nil
}

// policyName is the spike policy as rollout.ParsePolicy reads it.
func policyName(p rollout.Policy) string {
	if p == nil {
		return rollout.Median{}.String()
	}
	return p.String()
}
