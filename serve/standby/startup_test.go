package standby

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
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
		{"jetstream not enabled yet", live, jetstream.ErrJetStreamNotEnabled, true},
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

// TestNewGroupWaitsForJetStream: an instance started while its server
// does not answer JetStream requests (no responders, as right after a
// meta leader election) retries and joins once JetStream answers, instead
// of failing at start.
func TestNewGroupWaitsForJetStream(t *testing.T) {
	plain, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	port := plain.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { plain.Shutdown() })
	nc, err := nats.Connect(plain.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	var warned atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type result struct {
		g   *Group
		err error
	}
	res := make(chan result, 1)
	go func() {
		g, err := NewGroup(ctx, nc, GroupConfig{Group: "g", TTL: testTTL, StartWait: waitLimit,
			Warn: func(string, error) { warned.Add(1) }})
		res <- result{g, err}
	}()
	waitFor(t, "a start-up retry", func() bool { return warned.Load() >= 2 })
	select {
	case r := <-res:
		t.Fatalf("NewGroup returned before JetStream answered: %v", r.err)
	default:
	}
	plain.Shutdown()
	plain.WaitForShutdown()
	js, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.Shutdown(); js.WaitForShutdown() })
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatalf("NewGroup after JetStream came up: %v", r.err)
		}
		defer r.g.Close()
		if r.g.Late() {
			t.Error("an empty bucket reads as a held lease")
		}
	case <-ctx.Done():
		t.Fatal("NewGroup did not return once JetStream answered")
	}
}

// TestNewGroupStartErrors: the retries stop at StartWait with the last
// error, and an error that is not transient is returned at once.
func TestNewGroupStartErrors(t *testing.T) {
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
	ctx := ctxT(t)
	cases := []struct {
		name, bucket string
		wait         time.Duration
		want         string
		retried      bool
	}{
		{"no JetStream past the wait", "", 300 * time.Millisecond, "still failing after 300ms", true},
		{"invalid bucket name", "bad.name", waitLimit, "invalid bucket name", false},
	}
	for _, c := range cases {
		var warned atomic.Int32
		start := time.Now()
		_, err := NewGroup(ctx, nc, GroupConfig{Group: "g", Bucket: c.bucket, TTL: testTTL, StartWait: c.wait,
			Warn: func(string, error) { warned.Add(1) }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
		if (warned.Load() > 0) != c.retried {
			t.Errorf("%s: %d retries warned, want retries %v", c.name, warned.Load(), c.retried)
		}
		if !c.retried && time.Since(start) > waitLimit/2 {
			t.Errorf("%s: took %v, want an immediate error", c.name, time.Since(start))
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("%s: the test's context ended", c.name)
		}
	}
}
