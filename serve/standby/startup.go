package standby

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/jsreplicas"
)

// DefaultStartWait is GroupConfig.StartWait's default: long enough for a
// cluster to elect a JetStream meta leader and the lease stream's leader.
const DefaultStartWait = 30 * time.Second

// The start-up retries' waits: doubled after each failure, from the first
// to the last.
const (
	startBackoffFirst = 50 * time.Millisecond
	startBackoffLast  = 2 * time.Second
)

// startTryLimit bounds one try's wait for an answer: a node of a cluster
// without a meta leader leaves JetStream's requests unanswered.
const startTryLimit = 5 * time.Second

// transient reports whether err says JetStream cannot answer yet (no
// responder to a lease read, a timeout, a 503 "temporarily unavailable"
// from a cluster without a meta leader) or cannot place the replicas yet
// (jsreplicas.Forming) rather than that the request is wrong. A server
// without JetStream (ErrJetStreamNotEnabled: no responder to the
// bucket's creation) is not transient: it fails at once with its hint.
// ctx is the caller's: its own end is not transient.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		return false
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoStreamResponse) || jsreplicas.Forming(err) {
		return true
	}
	var api jetstream.JetStreamError
	if errors.As(err, &api) && api.APIError() != nil {
		return api.APIError().Code == http.StatusServiceUnavailable
	}
	return false
}

// retryStart calls try until it succeeds, fails with an error that is
// not transient, ctx ends or wait has passed, waiting between tries with
// a doubling backoff; warn hears each transient failure. Each try has
// until the end of wait, and at least startBackoffLast, to answer, at
// most startTryLimit. The error returned is try's last.
func retryStart(ctx context.Context, wait time.Duration, warn func(error), try func(context.Context) error) error {
	deadline := time.Now().Add(wait)
	backoff := startBackoffFirst
	for {
		tctx, cancel := context.WithTimeout(ctx, min(startTryLimit, max(time.Until(deadline), startBackoffLast)))
		err := try(tctx)
		cancel()
		if err == nil || !transient(ctx, err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w (still failing after %v)", err, wait)
		}
		warn(err)
		t := time.NewTimer(min(backoff, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, startBackoffLast)
	}
}
