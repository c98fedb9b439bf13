package standby

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
)

// startCluster starts n NATS servers with JetStream, routed to each other
// on loopback, and waits until JetStream answers.
func startCluster(t *testing.T, n int) []*server.Server {
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
	var srvs []*server.Server
	for i := range n {
		o := &server.Options{ServerName: fmt.Sprint("n", i), Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: ports[i]}, Routes: routes, NoSigs: true, NoLog: true}
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		srvs = append(srvs, s)
	}
	for i, s := range srvs {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("server %d not ready", i)
		}
	}
	nc, err := nats.Connect(srvs[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitGroup(t, "JetStream in the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	// The meta leader places replicas only on peers it knows current: a
	// bucket created before then gets fewer than the cluster allows.
	waitGroup(t, "every node current in the meta group", func() bool {
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
			return current == n-1
		}
		return false
	})
	return srvs
}

// TestLeaseBucketClusterReplicas: on a 3-node cluster the lease bucket has
// 3 replicas; with the node leading it killed, an instance on another node
// takes the lease over.
func TestLeaseBucketClusterReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster elects a new leader in seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	srvs := startCluster(t, 3)
	connect := func(s *server.Server) (*nats.Conn, jetstream.KeyValue) {
		nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		var kv jetstream.KeyValue
		waitGroup(t, "the lease bucket", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			kv, err = LeaseBucket(ctx, js, "leases", testTTL)
			return err == nil
		})
		return nc, kv
	}
	nc, kv := connect(srvs[0])
	ctx := ctxT(t)
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Config().Replicas; r != 3 {
		t.Fatalf("lease bucket with %d replicas on a 3-node cluster, want 3", r)
	}
	a := lease(t, kv, "a", LeaseConfig{})
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a acquires: %v, %v", ok, err)
	}
	js, _ := jetstream.New(nc)
	info, err := js.Stream(ctx, "KV_leases")
	if err != nil {
		t.Fatal(err)
	}
	leader := info.CachedInfo().Cluster.Leader
	var dead, alive *server.Server
	for _, s := range srvs {
		switch {
		case s.Name() == leader:
			dead = s
		case alive == nil:
			alive = s
		}
	}
	if dead == nil {
		t.Fatalf("no server named %q leads the bucket", leader)
	}
	_, kvB := connect(alive)
	b := lease(t, kvB, "b", LeaseConfig{})
	dead.Shutdown()
	dead.WaitForShutdown()
	waitGroup(t, "b takes the lease over with the bucket's leader dead", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ok, _ := b.TryAcquire(ctx)
		return ok
	})
}
