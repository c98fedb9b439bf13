package standby

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// catchUp asks the group for the device's state every SyncEvery until the
// processor has restored one. When the lease stays free for two TTLs (the
// holder died and no synced standby took over), nobody can answer: the
// replica goes on from its own state, and says so.
func (r *Replica) catchUp(ctx context.Context) {
	g := r.group
	period, ttl := g.cfg.SyncEvery, g.cfg.TTL
	t := time.NewTicker(period)
	defer t.Stop()
	var free time.Time
	for !r.synced.Load() {
		rctx, cancel := context.WithTimeout(ctx, period)
		m, err := g.nc.RequestWithContext(rctx, r.snapSubj, nil)
		cancel()
		gctx, cancel := context.WithTimeout(ctx, period)
		if err == nil {
			select {
			case r.raw <- &nats.Msg{Subject: r.applySubj, Data: m.Data}:
			default:
			}
		} else if _, gerr := g.lease.KV().Get(gctx, g.cfg.Group); errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted) {
			if free.IsZero() {
				free = time.Now()
			}
			if time.Since(free) > 2*ttl {
				r.synced.Store(true)
				g.cfg.Log.Warn().Str("device", r.name).Str("group", g.cfg.Group).
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
