package nemesis

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"rgcpred/serve/service"
)

// Instance is one predictord of the standby group, connected to every node
// through its own proxies. Its /metrics listens at each start on a port
// the kernel picks, read back from its log (MetricsAddr): a port picked
// before the start could be taken by another process when it binds.
type Instance struct {
	*Proc
	// ID is its --standby-id.
	ID string
	// Proxies lie between it and each node, in the cluster's order.
	Proxies []*Proxy

	mu sync.Mutex
	// metrics is the address of /metrics the start numbered metricsStart
	// logged.
	metrics      string
	metricsStart int
}

// start starts the instance's predictord (path, args) logging to logPath
// in JSON, its /metrics on a port the kernel picks (MetricsAddr); Restart
// starts it again the same way.
func (in *Instance) start(path, logPath string, args ...string) error {
	p, err := StartProc(in.ID, path, logPath, append(args, "--metrics-addr", "127.0.0.1:0", "--log-format", "json")...)
	if err != nil {
		return err
	}
	in.Proc = p
	return nil
}

// MetricsAddr returns the address of the instance's /metrics that its
// latest start logged (ok false before it listens).
func (in *Instance) MetricsAddr() (string, bool) {
	path, from, start := in.Output()
	in.mu.Lock()
	defer in.mu.Unlock()
	if start > 0 && in.metricsStart == start {
		return in.metrics, true
	}
	addr, ok := servingAddr(path, from)
	if ok {
		in.metrics, in.metricsStart = addr, start
	}
	return addr, ok
}

// servingAddr returns the address the first line of the log at path from
// offset from names as predictord's /metrics (service.ServingAddr).
func servingAddr(path string, from int64) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "", false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if addr, ok := service.ServingAddr(sc.Bytes()); ok {
			return addr, true
		}
	}
	return "", false
}

// gauge returns the value of the first sample of a metric on the
// instance's /metrics (ok false when it does not answer or has none).
func (in *Instance) gauge(name string) (float64, bool) {
	addr, ok := in.MetricsAddr()
	if !ok {
		return 0, false
	}
	resp, err := monitor.Get("http://" + addr + "/metrics")
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
