// Package jsstart opens what a daemon needs of NATS JetStream at its
// start: it retries while JetStream cannot answer yet (a node starting or
// down, a leader being elected), bounded in time, and fails at once on
// an error that retrying does not mend (a bad setting, no permission, a
// server without JetStream).
package jsstart

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

// DefaultWait is the start-up wait's default: long enough for a cluster
// to elect a JetStream meta leader and a stream's leader (4 to 9 s each
// on nats-server).
const DefaultWait = 30 * time.Second

// The retries' waits: doubled after each failure, from the first to the
// last.
const (
	backoffFirst = 50 * time.Millisecond
	backoffLast  = 2 * time.Second
)

// TryLimit bounds one try's wait for an answer: a node of a cluster
// without a meta leader leaves JetStream's requests unanswered.
const TryLimit = 5 * time.Second

// The reasons Reason names.
const (
	ReasonTimeout      = "timeout"
	ReasonNoResponders = "no_responders"
	ReasonUnavailable  = "unavailable"
	ReasonDisconnected = "disconnected"
	ReasonPlacement    = "placement"
)

// Reasons lists every value of Reason, for metrics initialised at start.
var Reasons = []string{ReasonTimeout, ReasonNoResponders, ReasonUnavailable, ReasonDisconnected, ReasonPlacement}

// Reason names why a transient err failed (Reasons; "" when err is not
// transient): no answer in time, no responder, a 503 "temporarily
// unavailable" (a cluster without a meta leader), the connection down
// (reconnecting, where a request without a reconnect buffer fails at
// once), or replicas the cluster cannot place yet (jsreplicas.Forming).
func Reason(err error) string {
	switch {
	case err == nil, errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return ""
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, jetstream.ErrNoStreamResponse):
		return ReasonTimeout
	case errors.Is(err, nats.ErrNoResponders):
		return ReasonNoResponders
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return ReasonDisconnected
	case jsreplicas.Forming(err):
		return ReasonPlacement
	}
	var api jetstream.JetStreamError
	if errors.As(err, &api) && api.APIError() != nil && api.APIError().Code == http.StatusServiceUnavailable {
		return ReasonUnavailable
	}
	return ""
}

// Transient reports whether err says JetStream cannot answer or place
// the replicas yet (Reason) rather than that the request is wrong. A
// server without JetStream (ErrJetStreamNotEnabled: no responder to the
// account's information) is not transient: it fails at once. ctx is the
// caller's: its own end is not transient.
func Transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && Reason(err) != ""
}

// Retry calls try until it succeeds, fails with an error that is not
// transient, ctx ends or wait has passed, waiting between tries with a
// doubling backoff; warn hears each transient failure. Each try has until
// the end of wait, and at least the longest backoff, to answer, at most
// TryLimit. The error returned is try's last.
func Retry(ctx context.Context, wait time.Duration, warn func(error), try func(context.Context) error) error {
	deadline := time.Now().Add(wait)
	backoff := backoffFirst
	for {
		tctx, cancel := context.WithTimeout(ctx, min(TryLimit, max(time.Until(deadline), backoffLast)))
		err := try(tctx)
		cancel()
		if err == nil || !Transient(ctx, err) {
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
		backoff = min(2*backoff, backoffLast)
	}
}
