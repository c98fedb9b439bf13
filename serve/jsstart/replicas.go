package jsstart

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/jsreplicas"
)

// Replicas returns the replicas of the stream name, 0 when there is no
// such stream. The account's information comes first: a server without
// JetStream answers it at once (ErrJetStreamNotEnabled), the stream's not.
func Replicas(ctx context.Context, js jetstream.JetStream, name string) (int, error) {
	if _, err := js.AccountInfo(ctx); err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().Config.Replicas, nil
}

// Intended returns the replicas a daemon's stream or bucket is meant to
// have: n when positive, else jsreplicas.Max when js's connection is to
// a cluster, else 1 (known once connected).
func Intended(js jetstream.JetStream, n int) int {
	if n > 0 {
		return n
	}
	if nc := js.Conn(); nc != nil && nc.ConnectedClusterName() != "" {
		return jsreplicas.Max
	}
	return 1
}

// Place creates or updates the stream name (apply, called with a replica
// count) in one try with want replicas (0: Intended), or fewer down to
// lowest while the cluster cannot place them, never fewer than it has
// (jsreplicas.Raise).
func Place(ctx context.Context, js jetstream.JetStream, name string, want, lowest int,
	apply func(ctx context.Context, replicas int) error) (jsreplicas.Placement, error) {
	have, err := Replicas(ctx, js, name)
	if err != nil {
		return jsreplicas.Placement{Want: want}, err
	}
	want = Intended(js, want)
	return jsreplicas.Raise(have, want, min(lowest, want), func(replicas int) error { return apply(ctx, replicas) })
}

// Open creates or updates the stream name (apply, called with a replica
// count) at a daemon's start with want replicas (0: Intended, once
// JetStream answered), never fewer than it has (Place). While JetStream
// cannot answer yet, or the cluster cannot place want yet
// (jsreplicas.Forming: too few peers current in its meta group, as while
// it forms or a node is down), it retries (Retry) for up to wait, telling
// warn; then it takes as many as the cluster places, and the Placement's
// Short says why not more. A stream with fewer replicas than want is
// raised to want.
func Open(ctx context.Context, js jetstream.JetStream, name string, want int, wait time.Duration, warn func(error),
	apply func(ctx context.Context, replicas int) error) (jsreplicas.Placement, error) {
	var p jsreplicas.Placement
	err := Retry(ctx, wait, warn, func(ctx context.Context) (err error) {
		p, err = Place(ctx, js, name, want, jsreplicas.Max, apply)
		return err
	})
	if err == nil || !jsreplicas.Unplaceable(err) {
		return p, err
	}
	tctx, cancel := context.WithTimeout(ctx, TryLimit)
	defer cancel()
	return Place(tctx, js, name, want, 1, apply)
}
