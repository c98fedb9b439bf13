package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Node is one NATS server of the cluster.
type Node struct {
	*Proc
	// Client, Cluster and Monitor are its ports on 127.0.0.1.
	Client, Cluster, Monitor int
}

// URL returns the node's client URL.
func (n *Node) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Client) }

// Cluster is a NATS cluster of real servers with routes and JetStream,
// each in its own process.
type Cluster struct {
	Nodes []*Node
}

// freePorts returns n free loopback TCP ports.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("nemesis: free port: %w", err)
		}
		lns = append(lns, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

// StartCluster starts n nats-server processes (binary) with JetStream
// (stores under dir) and routes to each other, and waits until every one
// reports healthy.
func StartCluster(ctx context.Context, binary, dir string, n int) (*Cluster, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Client: ports[3*i], Cluster: ports[3*i+1], Monitor: ports[3*i+2]})
	}
	for i, nd := range c.Nodes {
		var routes []string
		for j, o := range c.Nodes {
			if j != i {
				routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(o.Cluster))
			}
		}
		name := "n" + strconv.Itoa(i)
		nd.Proc, err = StartProc(name, binary, filepath.Join(dir, name+".log"),
			"-a", "127.0.0.1", "-p", strconv.Itoa(nd.Client), "-n", name, "-m", strconv.Itoa(nd.Monitor),
			"--cluster_name", "nemesis", "--cluster", "nats://127.0.0.1:"+strconv.Itoa(nd.Cluster),
			"--routes", strings.Join(routes, ","), "-js", "-sd", filepath.Join(dir, name))
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// URLs returns the nodes' client URLs.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL()
	}
	return out
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if n.Proc != nil {
			n.Kill()
		}
	}
}

var monitor = &http.Client{Timeout: 2 * time.Second}

// get fetches a node's monitoring endpoint into v (nil: status only).
func (n *Node) get(path string, v any) error {
	resp, err := monitor.Get("http://127.0.0.1:" + strconv.Itoa(n.Monitor) + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// WaitHealthy waits until every running node's /healthz answers 200
// (JetStream current) and a node names the JetStream meta leader, at most
// timeout.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var bad []string
		if _, err := c.MetaLeader(); err != nil {
			bad = append(bad, err.Error())
		}
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			if err := n.get("/healthz", nil); err != nil {
				bad = append(bad, n.Name()+": "+err.Error())
			}
		}
		if len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nemesis: cluster not healthy after %v: %s", timeout, strings.Join(bad, "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// MetaLeader returns the node that leads the JetStream meta group, as a
// running node's /jsz says.
func (c *Cluster) MetaLeader() (*Node, error) {
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		var jsz struct {
			Meta struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if err := n.get("/jsz", &jsz); err != nil || jsz.Meta.Leader == "" {
			continue
		}
		if l := c.Node(jsz.Meta.Leader); l != nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("nemesis: no node names a meta leader")
}

// Node returns the node of a server name (nil: none).
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name() == name {
			return n
		}
	}
	return nil
}
