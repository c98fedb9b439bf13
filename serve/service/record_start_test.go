package service

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/recorder"
)

// stalledJS is a JetStream whose first stalls stream creations time out,
// as a cluster electing the stream's leader answers none (Ensure creates
// with fewer replicas on a single server: several calls a try).
type stalledJS struct {
	jetstream.JetStream
	stalls, calls int
}

func (s *stalledJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s.calls++
	if s.calls <= s.stalls {
		return nil, fmt.Errorf("stream info: %w", context.DeadlineExceeded)
	}
	return s.JetStream.CreateOrUpdateStream(ctx, cfg)
}

// TestEnsureRecordingRetries: a daemon starting with --record while the
// stream does not answer tries again and starts once it does; a setting
// the server refuses ends the start at once.
func TestEnsureRecordingRetries(t *testing.T) {
	srv, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		stalls int
		cfg    recorder.Config
		ok     bool
	}{
		{"answers", 0, recorder.Config{Stream: "REC", Devices: []string{"dev0"}}, true},
		{"answers on the third try", 2, recorder.Config{Stream: "REC", Devices: []string{"dev0"}}, true},
		{"refused", 0, recorder.Config{Stream: "REC", Devices: []string{"dev0"}, Memory: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sj := &stalledJS{JetStream: js, stalls: tc.stalls}
			var warned []error
			_, err := ensureRecording(ctx, sj, tc.cfg, func(err error) { warned = append(warned, err) })
			if (err == nil) != tc.ok || len(warned) != tc.stalls {
				t.Fatalf("error %v after %d warnings; want ok %v after %d", err, len(warned), tc.ok, tc.stalls)
			}
		})
	}
}

// TestUnavailable: only a timeout or the cluster's "not available" is
// tried again.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}, false},
		{nats.ErrNoResponders, false},
		{errors.New("recorder: a stream name and at least one device are needed"), false},
	} {
		if got := unavailable(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
