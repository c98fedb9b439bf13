package service

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/recorder"
)

// Recording start bounds (ensureRecording).
const (
	// recordStartWait bounds how long a daemon starting with --record
	// tries to create or update its stream: a cluster electing the
	// stream's leader or its meta leader (a node just restarted) answers
	// nothing for seconds (4 to 9 on nats-server), and a daemon that gave
	// up at the first try would stay down.
	recordStartWait = 30 * time.Second
	// recordTryWait bounds one try.
	recordTryWait = 5 * time.Second
)

// ensureRecording creates or updates the recording stream
// (recorder.Ensure), trying again every second while the server does not
// answer in time or says its cluster is not available, up to
// recordStartWait, telling warn each failed try; any other error (a bad
// setting, a server without JetStream) ends it at once.
func ensureRecording(ctx context.Context, js jetstream.JetStream, cfg recorder.Config, warn func(error)) (jetstream.Stream, error) {
	deadline := time.Now().Add(recordStartWait)
	for {
		tctx, cancel := context.WithTimeout(ctx, recordTryWait)
		st, err := recorder.Ensure(tctx, js, cfg)
		cancel()
		if err == nil || !unavailable(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return st, err
		}
		warn(err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// unavailable reports whether err says the JetStream cluster did not
// answer in time or is not available for now.
func unavailable(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.Code == http.StatusServiceUnavailable
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
