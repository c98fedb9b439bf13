package standby

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/jsreplicas"
)

// TestLeaseBucketClusterReplicas: on a 3-node cluster the lease bucket has
// 3 replicas; with the node leading it killed, an instance on another node
// takes the lease over.
func TestLeaseBucketClusterReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster elects a new leader in seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	srvs := embedtest.StartCluster(t, embedtest.Servers(t, 3))
	connect := func(s *server.Server) (jetstream.JetStream, jetstream.KeyValue) {
		_, js := embedtest.Connect(t, s.ClientURL(), nats.MaxReconnects(-1))
		var kv jetstream.KeyValue
		embedtest.Wait(t, "the lease bucket", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			kv, err = LeaseBucket(ctx, js, "leases", testTTL)
			return err == nil
		})
		return js, kv
	}
	js, kv := connect(srvs[0])
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
	embedtest.Wait(t, "b takes the lease over with the bucket's leader dead", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ok, _ := b.TryAcquire(ctx)
		return ok
	})
}

// TestGroupLeaseBucketReplicas: the daemon's bucket set-up (NewGroup, its
// default replicas on a cluster) ends with the lease bucket on all 3
// nodes when it starts before the cluster has formed (no meta leader yet;
// the retries wait for it), or finds the bucket at R1, or while the meta
// leader knows too few peers to place 3 (refuse: its first answers, as
// while a node joins; stepping down at once left the bucket at R2).
func TestGroupLeaseBucketReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node clusters elect their meta leaders in seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	for _, c := range []struct {
		name   string
		early  int  // nodes started before the daemon, of 3; 3: the cluster formed
		r1     bool // a bucket made at R1 first
		refuse int  // 3 replicas refused this often first (no peers)
	}{
		{"one node up", 1, false, 0},
		{"two nodes up", 2, false, 0},
		{"an R1 bucket in the formed cluster", 3, true, 0},
		{"too few peers known at first", 3, false, 3},
		{"an R1 bucket, too few peers known at first", 3, true, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srvs := embedtest.Servers(t, 3)
			if c.early == 3 {
				embedtest.StartCluster(t, srvs)
			} else {
				embedtest.Start(t, srvs[:c.early]...)
			}
			nc, js := embedtest.Connect(t, srvs[0].ClientURL())
			if c.r1 {
				if _, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: "leases", History: 1, TTL: time.Second, Replicas: 1}); err != nil {
					t.Fatal(err)
				}
			}
			retried := make(chan struct{})
			var once sync.Once
			type result struct {
				p        jsreplicas.Placement
				replicas int // by default
				err      error
			}
			done := make(chan result, 1)
			warn := func(error) { once.Do(func() { close(retried) }) }
			go func() {
				if c.refuse > 0 {
					// The bucket set-up of NewGroup, on a server that refuses.
					var r refusingJS
					r.JetStream = js
					r.left.Store(int32(c.refuse))
					_, p, err := openLeaseBucket(ctxT(t), &r, "leases", testTTL, 3, waitLimit, warn)
					done <- result{p, 3, err}
					return
				}
				g, err := NewGroup(ctxT(t), nc, GroupConfig{Group: "g", Bucket: "leases", TTL: testTTL, StartWait: waitLimit,
					PeerWait: 50 * time.Millisecond, Warn: func(_ string, err error) { warn(err) }})
				if err != nil {
					done <- result{err: err}
					return
				}
				g.Close()
				done <- result{g.Placement(), g.Config().Replicas, nil}
			}()
			if c.early < 3 || c.refuse > 0 {
				select {
				case <-retried:
				case r := <-done:
					t.Fatalf("the bucket set-up returned without a retry (%v, %+v) while the cluster could not place 3", r.err, r.p)
				}
				embedtest.Start(t, srvs[c.early:]...)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if p := r.p; r.replicas != 3 || p.Want != 3 || p.Have != 3 || p.Reason() != jsreplicas.ReasonNone {
				t.Fatalf("%d replicas by default, placement %+v (%s); want 3 of 3", r.replicas, p, p.Reason())
			}
			embedtest.Wait(t, "the bucket on 3 nodes", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				s, err := js.Stream(ctx, "KV_leases")
				if err != nil {
					return false
				}
				info := s.CachedInfo()
				return info.Config.Replicas == 3 && info.Cluster != nil && len(info.Cluster.Replicas) == 2
			})
		})
	}
}

// TestGroupLeaseBucketReplicasSingle: on a single server the bucket has
// one replica by default, and 3 asked for leave it at 1, saying why.
func TestGroupLeaseBucketReplicasSingle(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	for _, c := range []struct {
		name       string
		replicas   int
		want, have int
		reason     string
	}{
		{"by default", 0, 1, 1, jsreplicas.ReasonNone},
		{"3 asked", 3, 3, 1, jsreplicas.ReasonNotClustered},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			g, err := NewGroup(ctxT(t), nc, GroupConfig{Group: "g", Bucket: "single" + fmt.Sprint(c.replicas), TTL: testTTL, Replicas: c.replicas,
				PeerWait: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if p := g.Placement(); p.Want != c.want || p.Have != c.have || p.Reason() != c.reason {
				t.Fatalf("placement %+v (%s); want %d of %d (%s)", p, p.Reason(), c.have, c.want, c.reason)
			}
		})
	}
}

// refusingJS answers a key-value bucket of more than 2 replicas as a meta
// leader that knows 2 peers does, while left lasts.
type refusingJS struct {
	jetstream.JetStream
	left atomic.Int32
}

func (r *refusingJS) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if cfg.Replicas > 2 && r.left.Add(-1) >= 0 {
		return nil, &jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}
	}
	return r.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
}

// TestNewGroupNodeKilled: an instance restarted right after a node of a
// 3-node cluster died (the lease bucket's leader: the bucket elects
// another; the meta leader; the node the instance is connected to, its
// connection reconnecting without a buffer, as predictord's in a group)
// starts: its failed tries of the bucket and the first lease read are
// retried, not fatal.
func TestNewGroupNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster elects a new leader in seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	for _, c := range []struct {
		name string
		kill func(srvs []*server.Server, bucketLeader string) int // the node killed; the instance connects to another first
	}{
		{"the bucket's leader", func(srvs []*server.Server, l string) int { return index(srvs, l) }},
		{"the meta leader", func(srvs []*server.Server, _ string) int {
			for i, s := range srvs {
				if s.JetStreamIsLeader() {
					return i
				}
			}
			return 0
		}},
		{"the instance's own node", func([]*server.Server, string) int { return -1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srvs := embedtest.StartCluster(t, embedtest.Servers(t, 3))
			setup, js := embedtest.Connect(t, srvs[0].ClientURL())
			// The cluster may still be placing its peers: the bucket's
			// start-up waits for them as a daemon's does.
			if _, p, err := openLeaseBucket(ctxT(t), js, "leases", testTTL, 3, waitLimit, func(error) {}); err != nil || p.Have != 3 {
				t.Fatalf("lease bucket before the kill: placement %+v, %v; want 3 replicas", p, err)
			}
			info, err := js.Stream(ctxT(t), "KV_leases")
			if err != nil {
				t.Fatal(err)
			}
			setup.Close()
			dead := c.kill(srvs, info.CachedInfo().Cluster.Leader)
			own := (dead + 1) % 3 // the instance's first server
			if dead < 0 {
				dead, own = 0, 0
			}
			urls := []string{srvs[own].ClientURL()}
			for i, s := range srvs {
				if i != own {
					urls = append(urls, s.ClientURL())
				}
			}
			nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
				nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(-1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			srvs[dead].Shutdown()
			var warned atomic.Int32
			g, err := NewGroup(ctxT(t), nc, GroupConfig{Group: "g", Bucket: "leases", TTL: testTTL, StartWait: waitLimit, PeerWait: 50 * time.Millisecond,
				Warn: func(key string, err error) {
					if key == WarnStart {
						warned.Add(1)
						t.Logf("retried: %v", err)
					}
				}})
			if err != nil {
				t.Fatalf("NewGroup with %s killed: %v after %d failed tries", srvs[dead].Name(), err, warned.Load())
			}
			g.Close()
			if p := g.Placement(); p.Have != 3 {
				t.Fatalf("placement %+v with a node killed, want the bucket's 3 kept", p)
			}
		})
	}
}

// index returns the index of the server named name in srvs (0 if none).
func index(srvs []*server.Server, name string) int {
	for i, s := range srvs {
		if s.Name() == name {
			return i
		}
	}
	return 0
}
