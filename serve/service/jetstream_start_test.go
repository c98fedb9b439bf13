package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/jsstart"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
)

// TestJetStreamStartServerLate: a restarted instance (recorder and hot
// standby) whose NATS server is down at start, connected as predictord
// connects in a group (no reconnect buffer), waits for the server,
// counting its failed tries as disconnected, then starts; the recording
// stream's replicas are exported, 1 of 1 on a single server.
func TestJetStreamStartServerLate(t *testing.T) {
	s, err := New(Config{Devices: []string{"dev0"}, Load: fakeLoader([]int{1, 2}), Replica: true, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), append(s.ConnOptions(), nats.ReconnectBufSize(-1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type result struct {
		stop func()
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stop, err := s.EnableJetStream(ctx, nc, JetStreamFeatures{Record: recorder.Config{Stream: "REC"},
			Standby: standby.GroupConfig{Group: "g", TTL: 2 * time.Second, PeerWait: 50 * time.Millisecond}})
		done <- result{stop, err}
	}()
	retried := func() float64 {
		return counter(t, s.reg, "predictord_jetstream_start_retries_total", "record", jsstart.ReasonDisconnected)
	}
	checkFor(t, waitLimit, func() error {
		select {
		case r := <-done:
			t.Fatalf("started before the server: %v", r.err)
		default:
		}
		if retried() < 1 {
			return fmt.Errorf("no failed try counted")
		}
		return nil
	})
	embedtest.JetStreamServer(t, embednats.Options{Port: port})
	r := <-done
	if r.err != nil {
		t.Fatalf("start after the server came: %v", r.err)
	}
	defer r.stop()
	for _, m := range []struct {
		name  string
		value float64
	}{{"predictord_record_replicas", 2}, {"predictord_record_replicas_short", 0}, {"predictord_standby_lease_replicas", 2}} {
		if got := gathered(t, s, m.name); got != m.value {
			t.Errorf("%s sums to %v, want %v", m.name, got, m.value)
		}
	}
}
