package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
// each in its own process. Every route goes through a proxy of its own
// (Links), so a node can be partitioned from the others.
type Cluster struct {
	Nodes []*Node
	// Links[i][j] is the proxy through which node i solicits its route to
	// node j (nil for i == j).
	Links [][]*Proxy
}

// noGossip is every node's advertised route address: a closed port. A
// node learns of the others through its configured routes only, all
// through Links; one that heard of a node over a route and tried its
// advertised address would bypass the proxies, so that address refuses.
const noGossip = "127.0.0.1:1"

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

// startTries is how many times StartCluster picks fresh ports: a port
// found free can be taken by another process before a node binds it
// (other tests listen on loopback too), and that node then exits at
// once ("address already in use").
const startTries = 3

// StartCluster starts n nats-server processes (binary) with JetStream
// (stores under dir) and routes to each other, and waits until every one
// reports healthy. A node that exits while starting (a port taken in
// the meantime) makes it start the cluster again on fresh ports, up to
// startTries times.
func StartCluster(ctx context.Context, binary, dir string, n int) (*Cluster, error) {
	var err error
	for try := 1; try <= startTries; try++ {
		var c *Cluster
		if c, err = startCluster(ctx, binary, dir, n); err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			break
		}
		for i := range n { // the next try starts with empty stores
			_ = os.RemoveAll(filepath.Join(dir, "n"+strconv.Itoa(i)))
		}
	}
	return nil, err
}

// startCluster is one try of StartCluster.
func startCluster(ctx context.Context, binary, dir string, n int) (*Cluster, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Links: make([][]*Proxy, n)}
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Client: ports[3*i], Cluster: ports[3*i+1], Monitor: ports[3*i+2]})
	}
	for i := range n {
		c.Links[i] = make([]*Proxy, n)
		for j, o := range c.Nodes {
			if j == i {
				continue
			}
			if c.Links[i][j], err = NewProxy("127.0.0.1:" + strconv.Itoa(o.Cluster)); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	for i, nd := range c.Nodes {
		var routes []string
		for _, p := range c.Links[i] {
			if p != nil {
				routes = append(routes, "nats://"+p.Addr())
			}
		}
		name := "n" + strconv.Itoa(i)
		nd.Proc, err = StartProc(name, binary, filepath.Join(dir, name+".log"),
			"-a", "127.0.0.1", "-p", strconv.Itoa(nd.Client), "-n", name, "-m", strconv.Itoa(nd.Monitor),
			"--cluster_name", "nemesis", "--cluster", "nats://127.0.0.1:"+strconv.Itoa(nd.Cluster),
			"--cluster_advertise", noGossip, "--routes", strings.Join(routes, ","), "-js", "-sd", filepath.Join(dir, name))
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	for _, nd := range c.Nodes {
		if !nd.Alive() {
			c.Stop()
			return nil, fmt.Errorf("nemesis: node %s exited while starting (its log: %s)", nd.Name(), filepath.Join(dir, nd.Name()+".log"))
		}
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

// Stop kills every node and closes the route proxies.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if n.Proc != nil {
			n.Kill()
		}
	}
	c.links(func(i, j int, p *Proxy) { p.Close() })
}

// links calls fn for every route proxy (from node i to node j).
func (c *Cluster) links(fn func(i, j int, p *Proxy)) {
	for i, ps := range c.Links {
		for j, p := range ps {
			if p != nil {
				fn(i, j, p)
			}
		}
	}
}

// Partition cuts node k from the others: every route to or from it
// swallows everything until Heal. Its clients stay connected to it.
func (c *Cluster) Partition(k int) {
	c.links(func(i, j int, p *Proxy) {
		if i == k || j == k {
			p.Cut()
		}
	})
}

// Heal ends every partition; the routes that lost data reconnect.
func (c *Cluster) Heal() {
	c.links(func(_, _ int, p *Proxy) { p.Heal() })
}

// Routes returns the number of distinct nodes each running node has a
// route to, as its /routez says (-1 for a node down or not answering).
func (c *Cluster) Routes() []int {
	out := make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		var rz struct {
			Routes []struct {
				Name string `json:"remote_name"`
			} `json:"routes"`
		}
		if !n.Alive() || n.get("/routez", &rz) != nil {
			out[i] = -1
			continue
		}
		peers := map[string]bool{}
		for _, r := range rz.Routes {
			peers[r.Name] = true
		}
		out[i] = len(peers)
	}
	return out
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
		// /healthz says why in its body: which stream or consumer is
		// not current, and why.
		var why struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&why) == nil && why.Error != "" {
			return fmt.Errorf("%s: %s: %s", path, resp.Status, why.Error)
		}
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
