package nemesis

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestClusterPartition starts a 3-node cluster whose routes go through the
// nemesis's proxies: it forms (each node routed to the other two) and
// JetStream elects a meta leader; a partition of node 1 stops messages
// between it and the others while nodes 0 and 2 still talk, and after the
// heal messages flow again.
func TestClusterPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	if err := goBuild(ctx, bin, natsServerPkg); err != nil {
		t.Fatal(err)
	}
	c, err := StartCluster(ctx, bin, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	waitRoutes(t, c, 2)
	if _, err := c.MetaLeader(); err != nil {
		t.Fatal(err)
	}
	conns := make([]*nats.Conn, 3)
	for i, n := range c.Nodes {
		if conns[i], err = nats.Connect(n.URL(), nats.MaxReconnects(-1)); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	// reach reports whether a message published on node from reaches a
	// subscriber on node to within d.
	seq := 0
	reach := func(from, to int, d time.Duration) bool {
		seq++
		subj := fmt.Sprintf("partition.%d", seq)
		sub, err := conns[to].SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := conns[to].Flush(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			if err := conns[from].Publish(subj, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.NextMsg(100 * time.Millisecond); err == nil {
				return true
			}
		}
		return false
	}
	for _, p := range [][2]int{{1, 0}, {0, 1}, {2, 0}} {
		if !reach(p[0], p[1], 10*time.Second) {
			t.Fatalf("before the partition, n%d does not reach n%d", p[0], p[1])
		}
	}
	c.Partition(1)
	for _, p := range [][2]int{{1, 0}, {0, 1}, {2, 1}} {
		if reach(p[0], p[1], time.Second) {
			t.Fatalf("partitioned, n%d reaches n%d", p[0], p[1])
		}
	}
	if !reach(2, 0, 5*time.Second) {
		t.Fatal("partitioning n1 cut n2 from n0")
	}
	c.Heal()
	for _, p := range [][2]int{{1, 0}, {0, 1}, {2, 1}} {
		if !reach(p[0], p[1], 15*time.Second) {
			t.Fatalf("healed, n%d does not reach n%d", p[0], p[1])
		}
	}
	waitRoutes(t, c, 2)
}

// waitRoutes waits until every node has routes to want others (10 s).
func waitRoutes(t *testing.T, c *Cluster, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		rs := c.Routes()
		for _, r := range rs {
			ok = ok && r == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("routes per node %v, want %d each", rs, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHealthzReason: a node's /healthz error names what is not current,
// from the answer's body, so that a wait for health that gives up says
// which stream held it.
func TestHealthzReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string // "" for no error
	}{
		{"healthy", http.StatusOK, `{"status":"ok"}`, ""},
		{"a stream behind", http.StatusServiceUnavailable,
			`{"status":"unavailable","status_code":503,"error":"JetStream stream '$G > RGCREC' is not current: group node unhealthy"}`,
			"/healthz: 503 Service Unavailable: JetStream stream '$G > RGCREC' is not current: group node unhealthy"},
		{"no body", http.StatusServiceUnavailable, ``, "/healthz: 503 Service Unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			port := srv.Listener.Addr().(*net.TCPAddr).Port
			err := (&Node{Monitor: port}).get("/healthz", nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
