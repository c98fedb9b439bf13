package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/daemon"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// stateQueueLen is the work queue's room for a device's state messages: a
// state request and a received state wait on their own budget, never the
// device's control budget (standby.Replica.Admit).
const stateQueueLen = 2

// EnableStandby makes the service one instance of the hot-standby group
// cfg.Group on nc (the connection later given to Run): the replication
// protocol (package standby) gates every device's decisions and stream
// events, observes the holder's, catches up with the holder's state, and
// runs the lease until stop is called; call stop after Run returned, so
// the drained decisions go out before the lease is released. The service
// must have been built with Config.Replica. Call it before Run.
func (s *Service) EnableStandby(ctx context.Context, nc *nats.Conn, cfg standby.GroupConfig) (stop func(), err error) {
	if !s.cfg.Replica {
		return nil, errors.New("service: standby needs a service built with Config.Replica (replica cores: no gathering, no skipping, whole calls)")
	}
	cfg.Scope = standby.Scope(cfg.Group, s.cfg.Shard, s.cfg.Shards)
	if err := s.standbyKeys(&cfg); err != nil {
		return nil, err
	}
	cfg.Log = s.log
	cfg.Warn = func(key string, err error) {
		if key == standby.WarnStart {
			s.startRetried("standby", "", err)
			return
		}
		s.limiter.warn(&s.log, key, 1, err.Error())
	}
	var g *standby.Group
	cfg.Healthy = func() bool { return s.progressing(g.Config().TTL) }
	if g, err = standby.NewGroup(ctx, nc, cfg); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	for _, d := range s.devices {
		r, err := g.Add(d.name, replicaDevice{d}, d.raw)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("service: %w", err)
		}
		d.sb = r
	}
	if err := s.reg.Register(&standbyCollector{s: s, g: g}); err != nil {
		g.Close()
		return nil, fmt.Errorf("service: standby metrics: %w", err)
	}
	s.group = g
	g.Start(ctx)
	return g.Stop, nil
}

// standbyKeys, with message authentication (Config.Keys), signs and
// checks what the group's instances tell each other with the group's key
// (Config.StandbyKeys), the devices' decisions and events with their Down
// keys (GroupConfig.DeviceAuth), and admits the group's reset
// announcements under the group's key (stream.Guard.WithGroup). Without
// the group's key it refuses: an instance that signs nothing would let
// anyone pass as one.
func (s *Service) standbyKeys(cfg *standby.GroupConfig) error {
	if s.cfg.Keys == nil {
		return nil
	}
	key := s.cfg.StandbyKeys[cfg.Group]
	if key == nil {
		return fmt.Errorf("service: message keys without a key of standby group %s: add a line \"%s standby <64 hex digits>\" to the key file "+
			"(docs/operations.md, \"Security\")", cfg.Group, cfg.Group)
	}
	var err error
	if cfg.Auth, err = standby.NewKeyAuth(cfg.Group, key); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if s.groupAuth, err = stream.NewAuth(key); err != nil {
		return fmt.Errorf("service: key of standby group %s: %w", cfg.Group, err)
	}
	down, up := map[string]*stream.Auth{}, map[string]*stream.Auth{}
	for _, d := range s.devices {
		down[d.name], up[d.name] = d.down, d.up
		d.guard.WithGroup(s.groupAuth)
	}
	cfg.DeviceAuth = func(device string) *stream.Auth { return down[device] }
	cfg.DeviceUp = func(device string) *stream.Auth { return up[device] }
	return nil
}

// progressing reports whether every device's processor makes progress: one
// inside a message for a whole TTL without finishing a model call has
// stalled (a hung model call; a slow one only delays, and a standby would
// be as slow), so the holder stops renewing and a standby takes over. A
// message of many model calls (a long gap's catch-up) keeps the lease.
func (s *Service) progressing(ttl time.Duration) bool {
	now := time.Now()
	for _, d := range s.devices {
		if d.progress.stalled(now, ttl) {
			return false
		}
	}
	return true
}

// replicaDevice is a device as the replication protocol drives it
// (standby.Device).
type replicaDevice struct{ d *device }

func (r replicaDevice) Snapshot() *daemon.Snapshot          { return r.d.core.Snapshot() }
func (r replicaDevice) Restore(snap *daemon.Snapshot) error { return r.d.core.Restore(snap) }
func (r replicaDevice) Frames(f *stream.Frames)             { r.d.core.Frames(f, 0) }
func (r replicaDevice) Control(c *stream.Control)           { r.d.core.Control(c) }

// Restored publishes the restored core's position for the status.
func (r replicaDevice) Restored() {
	d := r.d
	d.last.Store(d.core.LastSeq())
	d.epoch.Store(d.core.Epoch())
	d.first.Store(d.core.First())
	d.s.m.epoch.WithLabelValues(d.name).Set(float64(d.core.Epoch()))
}

// standbyAdmit reports whether a state message may wait for the processor
// (reader goroutine); requests refused for their rate are counted.
func (d *device) standbyAdmit(m *nats.Msg) bool {
	ok, limited := d.sb.Admit(m)
	if limited {
		d.reject("state_request_limited", 1, "a standby's state request refused: one answered per "+standby.StateEvery.String())
	}
	return ok
}

// standbyMsg handles a state request or a received state (processor
// goroutine).
func (d *device) standbyMsg(m *nats.Msg) {
	restored, err := d.sb.HandleState(m)
	if err != nil {
		d.s.limiter.warn(&d.s.log, d.name+"/standby", 1, err.Error(), devField(d.name))
	}
	if restored {
		d.s.log.Info().Str("device", d.name).Int64("last_seq", d.core.LastSeq()).Uint32("epoch", d.core.Epoch()).
			Msg("standby: caught up with the holder's state")
	}
}

// standbyDiverged handles a replica whose core applied a group event at a
// frame of its own (a reset announced too late for it): its state is no
// longer the group's, so it may not take over until it caught up again
// from a synced instance's state.
func (d *device) standbyDiverged() {
	if d.sb != nil && d.sb.Diverged() {
		d.s.log.Warn().Str("device", d.name).Msg("standby: state differs from the group's: catching up again from a synced instance")
	}
}

// standbyOn reports whether the service is an instance of a hot-standby
// group.
func (s *Service) standbyOn() bool { return s.group != nil }

// StandbyStatus reports the hot-standby lease's state, false without
// standby.
func (s *Service) StandbyStatus() (standby.LeaseStatus, bool) {
	if !s.standbyOn() {
		return standby.LeaseStatus{}, false
	}
	return s.group.Lease().Status(), true
}
