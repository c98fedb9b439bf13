// Package embedtest starts embedded NATS servers with JetStream on
// loopback for tests, alone (JetStream, JetStreamServer) or in clusters:
// servers made from options can be stopped and made again with their
// stores, as a node restarts.
package embedtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
)

// waitLimit bounds each wait for a cluster (a failure, not a measurement).
const waitLimit = 60 * time.Second

// JetStreamServer starts an embedded NATS server of o with JetStream,
// stopped at the end of the test. Unset fields default: Host 127.0.0.1,
// Port a free one, StoreDir a temporary folder of the test (a server
// started again with the same Port and StoreDir is the same node
// restarted).
func JetStreamServer(t testing.TB, o embednats.Options) *server.Server {
	t.Helper()
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = -1
	}
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	o.JetStream = true
	s, err := embednats.StartOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// Connect connects to url with opts and returns the connection, closed
// at the end of the test, and its JetStream.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// JetStream starts an embedded NATS server of o with JetStream
// (JetStreamServer) and connects to it with opts (Connect).
func JetStream(t testing.TB, o embednats.Options, opts ...nats.Option) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := JetStreamServer(t, o)
	nc, js := Connect(t, s.ClientURL(), opts...)
	return s, nc, js
}

// Options returns the options of n NATS servers with JetStream, named n0,
// n1, ..., routed to each other on loopback (NewServer makes one).
func Options(t testing.TB, n int) []*server.Options {
	t.Helper()
	// The route ports are picked first: every server names every other.
	ports := make([]int, n)
	var routes []*url.URL
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprint("127.0.0.1:", ports[i])})
	}
	var opts []*server.Options
	for i := range n {
		opts = append(opts, &server.Options{ServerName: fmt.Sprint("n", i), Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: ports[i]}, Routes: routes, NoSigs: true, NoLog: true})
	}
	return opts
}

// NewServer returns a server of o, not started (Start); a node stopped
// and made again from the same options restarts with its store.
func NewServer(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Servers returns n NATS servers with JetStream, routed to each other on
// loopback, not started (Start, StartCluster).
func Servers(t testing.TB, n int) []*server.Server {
	t.Helper()
	var srvs []*server.Server
	for _, o := range Options(t, n) {
		srvs = append(srvs, NewServer(t, o))
	}
	return srvs
}

// Start starts srvs, each stopped at the end of the test, and waits until
// each accepts connections.
func Start(t testing.TB, srvs ...*server.Server) {
	t.Helper()
	for _, s := range srvs {
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	for _, s := range srvs {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("server %s not ready", s.Name())
		}
	}
}

// StartCluster starts srvs (Servers) and waits until JetStream answers
// and every node is current in the meta group.
func StartCluster(t testing.TB, srvs []*server.Server) []*server.Server {
	t.Helper()
	Start(t, srvs...)
	nc, js := Connect(t, srvs[0].ClientURL())
	defer nc.Close() // only for the waits below
	Wait(t, "JetStream in the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	// The meta leader places replicas only on peers it knows current: a
	// stream created before then gets fewer than the cluster allows.
	Wait(t, "every node current in the meta group", func() bool { return MetaCurrent(srvs) == len(srvs)-1 })
	return srvs
}

// MetaCurrent returns the number of peers the meta leader among srvs
// knows current (-1: no leader among them).
func MetaCurrent(srvs []*server.Server) int {
	for _, s := range srvs {
		jsz, err := s.Jsz(nil)
		if err != nil || jsz.Meta == nil || jsz.Meta.Leader != s.Name() {
			continue
		}
		current := 0
		for _, p := range jsz.Meta.Replicas {
			if p.Current && !p.Offline {
				current++
			}
		}
		return current
	}
	return -1
}

// Wait waits until cond holds, failing the test after a minute.
func Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
