package standby

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
)

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

// TestNewGroupServerLate: an instance started while its NATS server is
// down (a node restarting; predictord's connection retries and buffers
// nothing while reconnecting) waits for it, saying so, then starts.
func TestNewGroupServerLate(t *testing.T) {
	for _, c := range []struct {
		name   string
		bufLen int // the connection's reconnect buffer (-1: none, as predictord's in a group)
	}{
		{"no reconnect buffer", -1},
		{"a reconnect buffer", 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := embedtest.Options(t, 1)[0]
			o.Cluster, o.Routes = server.ClusterOpts{}, nil
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			o.Port = l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", o.Port), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
				nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(c.bufLen))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			warned := make(chan error, 100)
			done := make(chan error, 1)
			go func() {
				g, err := NewGroup(ctxT(t), nc, GroupConfig{Group: "g", Bucket: "leases", TTL: testTTL, StartWait: waitLimit, PeerWait: 50 * time.Millisecond,
					Warn: func(_ string, err error) {
						select {
						case warned <- err:
						default:
						}
					}})
				if err == nil {
					g.Close()
				}
				done <- err
			}()
			select {
			case err := <-warned:
				t.Logf("while the server is down: %v", err)
			case err := <-done:
				t.Fatalf("NewGroup returned %v before the server started", err)
			}
			embedtest.Start(t, embedtest.NewServer(t, o))
			if err := <-done; err != nil {
				t.Fatalf("NewGroup after the server started: %v", err)
			}
		})
	}
}
