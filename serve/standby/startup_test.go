package standby

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
)

func TestTransient(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no responders", live, fmt.Errorf("read: %w", nats.ErrNoResponders), true},
		{"request timeout", live, nats.ErrTimeout, true},
		{"request deadline", live, context.DeadlineExceeded, true},
		{"no meta leader", live, unavailable, true},
		{"server without JetStream", live, jetstream.ErrJetStreamNotEnabled, false},
		{"caller's end", done, nats.ErrNoResponders, false},
		{"bad bucket name", live, jetstream.ErrInvalidBucketName, false},
		{"not found", live, jetstream.ErrKeyNotFound, false},
		{"bad request", live, &jetstream.APIError{Code: 400, ErrorCode: 10052, Description: "invalid stream config"}, false},
	}
	for _, c := range cases {
		if got := transient(c.ctx, c.err); got != c.want {
			t.Errorf("%s: transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestRetryStart: transient failures are retried with backoff until the
// call succeeds or the wait has passed; any other error ends it at once.
func TestRetryStart(t *testing.T) {
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
		err := retryStart(ctxT(t), c.wait, func(error) { warnings++ }, func(context.Context) error {
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

// TestNewGroupWithoutJetStream: a server without JetStream fails NewGroup
// at once, not after StartWait.
func TestNewGroupWithoutJetStream(t *testing.T) {
	plain, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Shutdown() })
	nc, err := nats.Connect(plain.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	start := time.Now()
	_, err = NewGroup(ctxT(t), nc, GroupConfig{Group: "g", TTL: testTTL, StartWait: waitLimit})
	if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		t.Fatalf("error %v, want JetStream not enabled", err)
	}
	if d := time.Since(start); d > waitLimit/2 {
		t.Fatalf("took %v, want an immediate error", d)
	}
}
