package standby

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// catchUp asks the group for the device's state every SyncEvery until the
// processor has restored one. Only the lease holder's answer is taken (its
// incarnation and a revision it wrote, checked against the lease entry;
// its signature, with an authenticator); an answer that claims the lease
// and fails the check raises AlarmState. When the lease stays free for
// two TTLs (the holder died and no synced standby took over), nobody can
// answer: the replica goes on from its own state, and says so.
func (r *Replica) catchUp(ctx context.Context) {
	g := r.group
	period, ttl := g.cfg.SyncEvery, g.cfg.TTL
	t := time.NewTicker(period)
	defer t.Stop()
	var free time.Time
	for !r.synced.Load() {
		rctx, cancel := context.WithTimeout(ctx, period)
		answered, gerr := r.askState(rctx)
		cancel()
		switch {
		case answered:
			free = time.Time{}
		case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
			if free.IsZero() {
				free = time.Now()
			}
			if time.Since(free) > 2*ttl {
				r.synced.Store(true)
				g.cfg.Log.Warn().Str("device", r.name).Str("group", g.cfg.Group).
					Msg("standby: no instance to catch up from and the lease is free: going on from this instance's own state")
			}
		default:
			free = time.Time{}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// askState requests the device's state and hands the holder's answer to
// the processor. It reports whether one came, or else the error of
// reading the lease entry (which tells a free lease).
func (r *Replica) askState(ctx context.Context) (bool, error) {
	g := r.group
	inbox := g.nc.NewRespInbox()
	sub, err := g.nc.SubscribeSync(inbox)
	if err != nil {
		return false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := g.nc.PublishRequest(r.snapSubj, inbox, nil); err != nil {
		return false, err
	}
	var entry *LeaseEntry
	var rev uint64
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if entry != nil {
				return false, nil
			}
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.SyncEvery)
			defer cancel()
			_, gerr := g.lease.KV().Get(gctx, g.cfg.Group)
			return false, gerr
		}
		if m.Header.Get(IncarnationHeader) == "" {
			continue // a synced instance that does not hold the lease
		}
		if entry == nil {
			v, erev, err := g.lease.Holder(ctx)
			if err != nil {
				return false, err // an entry no instance wrote: the lease raises its alarm
			}
			entry, rev = &v, erev
		}
		if err := checkAnswer(m, *entry, rev, g.cfg.Auth); err != nil {
			g.alarm(AlarmState, r.name, fmt.Errorf("standby: a state answer refused: %w", err))
			continue
		}
		select {
		case r.raw <- &nats.Msg{Subject: r.applySubj, Data: m.Data}:
		default:
		}
		return true, nil
	}
}
