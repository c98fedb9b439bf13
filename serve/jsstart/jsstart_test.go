package jsstart

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestTransient: JetStream not answering yet, the connection down and
// replicas not placeable yet are retried, each with its reason; a
// request that is wrong, a server without JetStream and the caller's own
// end are not.
func TestTransient(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	cases := []struct {
		name   string
		ctx    context.Context
		err    error
		reason string // "": not transient
	}{
		{"no responders", live, fmt.Errorf("read: %w", nats.ErrNoResponders), ReasonNoResponders},
		{"request timeout", live, nats.ErrTimeout, ReasonTimeout},
		{"request deadline", live, context.DeadlineExceeded, ReasonTimeout},
		{"no stream response", live, jetstream.ErrNoStreamResponse, ReasonTimeout},
		{"no meta leader", live, unavailable, ReasonUnavailable},
		{"reconnecting without a buffer", live, fmt.Errorf("bucket: %w", nats.ErrReconnectBufExceeded), ReasonDisconnected},
		{"reconnecting", live, nats.ErrConnectionReconnecting, ReasonDisconnected},
		{"disconnected", live, nats.ErrDisconnected, ReasonDisconnected},
		{"too few peers", live, &jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}, ReasonPlacement},
		{"server without JetStream", live, jetstream.ErrJetStreamNotEnabled, ""},
		{"account without JetStream", live, jetstream.ErrJetStreamNotEnabledForAccount, ""},
		{"caller's end", done, nats.ErrNoResponders, ""},
		{"bad bucket name", live, jetstream.ErrInvalidBucketName, ""},
		{"not found", live, jetstream.ErrKeyNotFound, ""},
		{"permissions", live, nats.ErrPermissionViolation, ""},
		{"a single server", live, &jetstream.APIError{Code: 500, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"}, ""},
		{"bad request", live, &jetstream.APIError{Code: 400, ErrorCode: 10052, Description: "invalid stream config"}, ""},
		{"none", live, nil, ""},
	}
	for _, c := range cases {
		if got := Transient(c.ctx, c.err); got != (c.reason != "") {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.reason != "")
		}
		if c.ctx == live {
			if got := Reason(c.err); got != c.reason {
				t.Errorf("%s: Reason(%v) = %q, want %q", c.name, c.err, got, c.reason)
			}
		}
	}
}

// TestRetry: transient failures are retried with backoff until the
// call succeeds or the wait has passed; any other error ends it at once.
func TestRetry(t *testing.T) {
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	bad := errors.New("bad request")
	cases := []struct {
		name     string
		fails    []error // the errors of the first calls; nil after
		wait     time.Duration
		calls    int    // 0: at least 2 (how many fit in the wait depends on the machine's load)
		warnings int    // with calls 0: one fewer than the calls
		want     string // "" no error, else a part of it
	}{
		{"answers after an election", []error{nats.ErrNoResponders, unavailable, nats.ErrNoResponders}, time.Minute, 4, 3, ""},
		{"answers at once", nil, time.Minute, 1, 0, ""},
		{"not transient", []error{bad}, time.Minute, 1, 0, "bad request"},
		{"past the wait", []error{nats.ErrNoResponders, nats.ErrNoResponders, nats.ErrNoResponders, nats.ErrNoResponders, nats.ErrNoResponders, nats.ErrNoResponders},
			120 * time.Millisecond, 0, 0, "still failing after 120ms"},
	}
	for _, c := range cases {
		calls, warnings := 0, 0
		err := Retry(ctxT(t), c.wait, func(error) { warnings++ }, func(context.Context) error {
			calls++
			if calls <= len(c.fails) {
				return c.fails[calls-1]
			}
			return nil
		})
		switch {
		case c.want == "" && err != nil, c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		case c.calls == 0 && (calls < 2 || warnings != calls-1), c.calls != 0 && (calls != c.calls || warnings != c.warnings):
			t.Errorf("%s: %d calls and %d warnings, want %d and %d", c.name, calls, warnings, c.calls, c.warnings)
		}
	}
}
