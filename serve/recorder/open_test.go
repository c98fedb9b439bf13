package recorder

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/jsreplicas"
	"rgcpred/serve/jsstart"
)

// stalledJS is a JetStream whose first stalls stream creations time out,
// as a cluster electing the stream's leader answers none.
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

// TestOpenRetries: a daemon starting with --record while the stream does
// not answer tries again and starts once it does; a setting the server
// refuses ends the start at once. A single server's stream has 1 replica,
// as wanted.
func TestOpenRetries(t *testing.T) {
	_, _, js := embedtest.JetStream(t, embednats.Options{})
	ctx := ctxT(t)
	for _, tc := range []struct {
		name   string
		stalls int
		cfg    Config
		ok     bool
	}{
		{"answers", 0, Config{Stream: "REC", Devices: []string{dev}}, true},
		{"answers on the third try", 2, Config{Stream: "REC", Devices: []string{dev}}, true},
		{"refused", 0, Config{Stream: "REC", Devices: []string{dev}, Memory: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sj := &stalledJS{JetStream: js, stalls: tc.stalls}
			var warned []error
			_, p, err := Open(ctx, sj, tc.cfg, waitLimit, func(err error) { warned = append(warned, err) })
			if (err == nil) != tc.ok || len(warned) != tc.stalls {
				t.Fatalf("error %v after %d warnings; want ok %v after %d", err, len(warned), tc.ok, tc.stalls)
			}
			if tc.ok && (p.Want != 1 || p.Have != 1) {
				t.Fatalf("placement %+v on a single server, want 1 of 1", p)
			}
		})
	}
}

// refusingJS answers a stream of 3 replicas with code (10023:
// insufficient resources, 10005: no suitable peers), as a server that
// cannot place them with a node down, while left lasts.
type refusingJS struct {
	jetstream.JetStream
	code jetstream.ErrorCode
	left atomic.Int32
}

func (r *refusingJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if cfg.Replicas == 3 && r.left.Add(-1) >= 0 {
		return nil, &jetstream.APIError{Code: 500, ErrorCode: r.code, Description: "cannot place 3"}
	}
	return r.JetStream.CreateOrUpdateStream(ctx, cfg)
}

// TestOpenClusterReplicas: on a 3-node cluster the recording stream is
// opened at a restart with a node down (an R3 stream's leader: it elects
// another) without losing replicas: one with 3 keeps 3, even while the
// server refuses 3 (a step down to 2 would shrink it); one with 1 is
// raised to 3 (nats-server places a replica on the node down), or, while
// 3 is refused past the wait, to 2, saying why, then to 3 at the next
// start.
func TestOpenClusterReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node clusters elect their leaders in seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	cfg := Config{Stream: "REC", Devices: []string{dev}}
	for _, c := range []struct {
		name     string
		before   int // the stream's replicas before the restart
		code     jetstream.ErrorCode
		refuse   int32 // 3 replicas refused this often first, with code
		wait     time.Duration
		have     int // after the restart, with the node down
		reason   string
		raisedTo int // after a restart with the node back
	}{
		{"R3 kept", 3, 0, 0, waitLimit, 3, jsreplicas.ReasonNone, 3},
		{"R3 kept while 3 is refused", 3, 10023, 3, waitLimit, 3, jsreplicas.ReasonNone, 3},
		{"R1 raised to 3", 1, 0, 0, waitLimit, 3, jsreplicas.ReasonNone, 3},
		{"R1 raised to 2 while 3 is refused, then to 3", 1, 10005, 1 << 20, time.Second, 2, jsreplicas.ReasonNoPeers, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			opts := embedtest.Options(t, 3)
			srvs := embedtest.StartCluster(t, []*server.Server{embedtest.NewServer(t, opts[0]), embedtest.NewServer(t, opts[1]), embedtest.NewServer(t, opts[2])})
			js := connect(t, srvs[0])
			sc, err := streamConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			sc.Replicas = c.before
			// The cluster may still be placing its peers (a busy machine):
			// the stream is created with the daemon's start-up retries.
			var st jetstream.Stream
			if err := jsstart.Retry(ctxT(t), waitLimit, func(error) {}, func(ctx context.Context) (err error) {
				st, err = js.CreateStream(ctx, sc)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			// The node down is never n0 (the test's connection) and, for
			// R3, the stream's leader when it can be: the stream elects
			// another. An R1 stream's only replica stays up.
			leader := int(st.CachedInfo().Cluster.Leader[1] - '0')
			down := 1
			switch {
			case c.before == 3 && leader != 0:
				down = leader
			case c.before == 1 && leader == 1:
				down = 2
			}
			srvs[down].Shutdown()
			srvs[down].WaitForShutdown()
			// A meta leader that has not seen the node go yet places
			// replicas on it.
			embedtest.Wait(t, "the node known gone", func() bool { return metaCurrent(srvs, nil) == 1 })
			r := &refusingJS{JetStream: connect(t, srvs[3-down]), code: c.code}
			r.left.Store(c.refuse)
			warned := 0
			_, p, err := Open(ctxT(t), r, cfg, c.wait, func(error) { warned++ })
			if err != nil {
				t.Fatalf("open with %s down: %v after %d warnings", srvs[down].Name(), err, warned)
			}
			if p.Want != 3 || p.Have != c.have || p.Reason() != c.reason || replicas(t, js) != c.have {
				t.Fatalf("with %s down: placement %+v (%s), the stream at %d; want %d of 3 (%s)", srvs[down].Name(), p, p.Reason(), replicas(t, js), c.have, c.reason)
			}
			if c.refuse > 0 && warned < min(int(c.refuse), 2) {
				t.Fatalf("%d warnings for %d refusals", warned, c.refuse)
			}
			back := embedtest.NewServer(t, opts[down])
			embedtest.Start(t, back)
			embedtest.Wait(t, "the node current again", func() bool { return metaCurrent(srvs, back) == 2 })
			if _, p, err = Open(ctxT(t), js, cfg, waitLimit, func(error) {}); err != nil || p.Have != c.raisedTo {
				t.Fatalf("open with every node: %+v, %v; want %d replicas", p, err, c.raisedTo)
			}
		})
	}
}

// metaCurrent returns the peers the meta leader among the running
// servers of srvs and back (the node made again, nil before) knows
// current.
func metaCurrent(srvs []*server.Server, back *server.Server) int {
	var live []*server.Server
	for _, s := range append(srvs, back) {
		if s != nil && s.Running() {
			live = append(live, s)
		}
	}
	return embedtest.MetaCurrent(live)
}

// connect returns a JetStream on a connection to s, closed at the end.
func connect(t *testing.T, s *server.Server) jetstream.JetStream {
	t.Helper()
	_, js := embedtest.Connect(t, s.ClientURL(), nats.MaxReconnects(-1))
	return js
}

// replicas returns the recording stream's replicas.
func replicas(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(ctxT(t), "REC")
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().Config.Replicas
}
