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
// and fails the check raises AlarmState. While the lease is free, an
// instance with the group's state that answers on PeersSubject (a holder
// whose holding lapsed, a synced standby) will take it: the replica waits.
// When the lease stays free and no such instance answers for PeerWait (the
// holder died with the state), nobody can answer: the replica goes on
// from its own state, and says so.
func (r *Replica) catchUp(ctx context.Context) {
	g := r.group
	period := g.cfg.SyncEvery
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
			if alive, err := g.peerSynced(ctx, period); alive || err != nil {
				free = time.Time{} // an instance with the state will take the lease, or unknown
				break
			}
			if time.Since(free) > g.cfg.PeerWait {
				r.synced.Store(true)
				g.cfg.Log.Warn().Str("device", r.name).Str("group", g.cfg.Group).
					Msg("standby: no instance to catch up from, none with the group's state answered and the lease is free: going on from this instance's own state")
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
