package nemesis

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Instance is one predictord of the standby group, connected to every node
// through its own proxies.
type Instance struct {
	*Proc
	// ID is its --standby-id; Metrics the port of its /metrics.
	ID      string
	Metrics int
	// Proxies lie between it and each node, in the cluster's order.
	Proxies []*Proxy
}

// gauge returns the value of the first sample of a metric on the
// instance's /metrics (ok false when it does not answer or has none).
func (in *Instance) gauge(name string) (float64, bool) {
	resp, err := monitor.Get("http://127.0.0.1:" + strconv.Itoa(in.Metrics) + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// Holder reports whether the instance says it holds the lease.
func (in *Instance) Holder() bool {
	v, ok := in.gauge("predictord_standby_holder")
	return ok && v == 1
}

// Synced reports whether the instance says its state is the group's.
func (in *Instance) Synced() bool {
	v, ok := in.gauge("predictord_standby_synced")
	return ok && v == 1
}

// Cut cuts every link of the instance; Heal heals them.
func (in *Instance) Cut() {
	for _, p := range in.Proxies {
		p.Cut()
	}
}

// Slow slows every link of the instance.
func (in *Instance) Slow(latency time.Duration) {
	for _, p := range in.Proxies {
		p.Slow(latency)
	}
}

// Heal ends the cuts and slow links of the instance.
func (in *Instance) Heal() {
	for _, p := range in.Proxies {
		p.Heal()
	}
}
