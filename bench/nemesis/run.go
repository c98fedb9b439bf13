// Package nemesis runs seeded, randomised fault schedules against a
// predictord standby group on a local topology - a NATS cluster of real
// servers with routes and JetStream, each in its own process; two or three
// predictord processes in one group, each connected to every node through
// fault-injecting proxies; the device (bench/replay) playing a stretch of
// a recording at real time - and ends each schedule with the history
// checker's verdict (bench/history) and the seed that reproduces it.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/bench/history"
	"rgcpred/bench/replay"
	"rgcpred/rgc"
	"rgcpred/stream"
)

// Group, Device and LeaseStream are the names the topology uses.
const (
	Group  = "nemesis"
	Device = "dev0"
	// LeaseStream is the JetStream stream behind predictord's default
	// lease bucket.
	LeaseStream = "KV_rgcpred_standby"
)

// Config describes the topology and the stretch every schedule replays.
type Config struct {
	// NATSServer and Predictord are the binaries (Build makes them).
	NATSServer, Predictord string
	// Model is the checkpoint predictord serves, in Precision.
	Model, Precision string
	// Rec, From, To and Cells are the stretch the device plays and the
	// cells the group serves (all of them: the start rule is the
	// daemon's over its whole list).
	Rec      *rgc.Recording
	From, To int
	Cells    []int
	// Ref is the undisturbed offline rollout of the stretch.
	Ref *history.Reference
	// Nodes and Instances size the topology (default 3 and 2).
	Nodes, Instances int
	// TTL is the group's lease TTL (predictord --standby-ttl; default 60 ms).
	TTL time.Duration
	// Threads is each predictord's --threads (default 1).
	Threads int
	// Kinds are the faults drawn from (nil: all; empty: none, an
	// undisturbed run).
	Kinds []Kind
	// Record, if not nil, turns the flight recorder on and audits each
	// schedule's recording.
	Record *Recorder
	// Keys, if not nil, turns message authentication on.
	Keys *Keys
	// Dir holds each schedule's logs and stores (seed-N); a passing
	// schedule's folder is removed.
	Dir string
	// Log, if not nil, hears progress lines.
	Log io.Writer
}

func (c *Config) defaults() {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Instances == 0 {
		c.Instances = 2
	}
	if c.TTL == 0 {
		c.TTL = 60 * time.Millisecond
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if c.Kinds == nil {
		c.Kinds = Kinds
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Length returns the replay's length after its history.
func (c *Config) Length() time.Duration {
	return time.Duration(float64(c.To-c.From-rgc.WindowBins) / rgc.BinRateHz * float64(time.Second))
}

// Verdict is the outcome of one schedule.
type Verdict struct {
	Seed   uint64  `json:"seed"`
	Faults []Fault `json:"faults"`
	// History is the checker's verdict on the decisions the device took.
	History *history.Report `json:"history"`
	// Outages are the window ends of the declared full outages applied
	// (OutageBefore, OutageAfter): a decision lost there counts as
	// History.LostInOutage.
	Outages []history.Span `json:"outages,omitempty"`
	// States compares the final states of the instances that answered
	// (Answered of Instances), once they settled after the replay;
	// Unsettled says why they did not within SettleTimeout ("" when they
	// did), and then States is not a verdict.
	States    *history.StateReport `json:"states"`
	Answered  int                  `json:"answered"`
	Instances int                  `json:"instances"`
	Unsettled string               `json:"unsettled,omitempty"`
	// Settle is how long the instances took to settle (or SettleTimeout).
	Settle time.Duration `json:"settle_ns"`
	// Published counts the decisions published per lease revision (every
	// holder's term), before the device's fence.
	Published map[uint64]int64 `json:"published"`
	// Fence is what the device's fence dropped or took behind its mark,
	// and Resend its decisions resend requests.
	Fence  stream.FenceStats  `json:"fence"`
	Resend stream.ResendStats `json:"resend"`
	// Recording is the audit of the flight recorder's recording (nil
	// without Config.Record).
	Recording *Recording `json:"recording,omitempty"`
	// Unrecovered counts faults after which the topology did not recover
	// (every node healthy, every instance synced, one holder) in time.
	Unrecovered int `json:"unrecovered"`
	// Err is an error that stopped the schedule ("" if none).
	Err string `json:"error,omitempty"`
	// Wall is how long the schedule took.
	Wall time.Duration `json:"wall_ns"`
}

// OK reports whether the schedule ran, its history passed, its instances
// settled with identical states and, with the recorder on, the
// recording's audit passed.
func (v *Verdict) OK() bool {
	return v.Err == "" && v.History != nil && v.History.OK() && v.Unsettled == "" && v.States != nil && v.States.OK() &&
		v.Answered == v.Instances && (v.Recording == nil || v.Recording.OK())
}

// String summarises the verdict in a few lines.
func (v *Verdict) String() string {
	var b strings.Builder
	res := "PASS"
	if !v.OK() {
		res = "FAIL"
	}
	fmt.Fprintf(&b, "seed %d: %s in %.0fs\n", v.Seed, res, v.Wall.Seconds())
	for _, f := range v.Faults {
		fmt.Fprintf(&b, "  fault: %s\n", f)
	}
	if v.Err != "" {
		fmt.Fprintf(&b, "  error: %s\n", v.Err)
	}
	for _, o := range v.Outages {
		fmt.Fprintf(&b, "  declared outage: window ends %d to %d\n", o.From, o.To)
	}
	if v.History != nil {
		fmt.Fprintf(&b, "  history: %s\n", v.History)
		for _, e := range v.History.Examples {
			fmt.Fprintf(&b, "    %s\n", e)
		}
		fmt.Fprintf(&b, "  device: fence repeated %d, fenced %d, resynced %d, resent %d, late %d; resend requests %d, answered %d, unanswered %d, copies %d, gaps %d\n",
			v.Fence.Repeated, v.Fence.Fenced, v.Fence.Resynced, v.Fence.Resent, v.Fence.Late,
			v.Resend.Requests, v.Resend.Answered, v.Resend.Unanswered, v.Resend.Announced, v.Resend.Gaps)
	}
	if v.Unsettled != "" {
		fmt.Fprintf(&b, "  unsettled %v after the replay: %s\n", SettleTimeout, v.Unsettled)
	} else if v.States != nil {
		fmt.Fprintf(&b, "  states: %s; %d of %d instances answered, settled in %.1fs\n", v.States, v.Answered, v.Instances,
			v.Settle.Seconds())
	}
	if v.Recording != nil {
		fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(strings.TrimSpace(v.Recording.String()), "\n", "\n  "))
	}
	if len(v.Published) > 0 {
		var n int64
		for _, k := range v.Published {
			n += k
		}
		fmt.Fprintf(&b, "  published: %d decisions under %d lease revisions (every holder's term)\n", n, len(v.Published))
	}
	if v.Unrecovered > 0 {
		fmt.Fprintf(&b, "  %d faults not recovered from in time\n", v.Unrecovered)
	}
	return b.String()
}

// topology is one schedule's running system.
type topology struct {
	cfg       *Config
	dir       string
	cluster   *Cluster
	instances []*Instance
	nc        *nats.Conn // the device's connection
	js        jetstream.JetStream
}

// Run runs the schedule of seed: it starts the topology, plays the stretch
// at real time while applying the seed's faults, checks the history and
// the replicas' states, and stops everything.
func Run(ctx context.Context, cfg Config, seed uint64) *Verdict {
	cfg.defaults()
	start := time.Now()
	v := &Verdict{Seed: seed, Instances: cfg.Instances}
	v.Faults = Plan(seed, cfg.Length(), cfg.TTL, cfg.Kinds)
	for i := range v.Faults {
		v.Faults[i].Skipped = "not reached"
	}
	dir := filepath.Join(cfg.Dir, "seed-"+strconv.FormatUint(seed, 10))
	err := run(ctx, &cfg, dir, v)
	v.Wall = time.Since(start)
	if err != nil {
		v.Err = err.Error()
	}
	if v.OK() {
		_ = os.RemoveAll(dir) // the logs of a passing schedule are not kept
	}
	return v
}

func run(ctx context.Context, cfg *Config, dir string, v *Verdict) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nemesis: %w", err)
	}
	t := &topology{cfg: cfg, dir: dir}
	defer t.stop()
	var err error
	if t.cluster, err = StartCluster(ctx, cfg.NATSServer, dir, cfg.Nodes); err != nil {
		return err
	}
	if t.nc, err = nats.Connect(strings.Join(t.cluster.URLs(), ","), nats.Name("nemesis device"),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond)); err != nil {
		return fmt.Errorf("nemesis: device: %w", err)
	}
	if t.js, err = jetstream.New(t.nc); err != nil {
		return fmt.Errorf("nemesis: %w", err)
	}
	for i := range cfg.Instances {
		if err := t.startInstance(i); err != nil {
			return err
		}
		if err := t.join(ctx, t.instances[i]); err != nil {
			return fmt.Errorf("nemesis: instance %d did not join: %w", i, err)
		}
	}
	if err := waitReached(ctx, t.nc, cfg.Instances, 20*time.Second); err != nil {
		return err
	}
	pub, err := stream.NewPublisher(t.nc, Device)
	if err != nil {
		return err
	}
	if cfg.Keys != nil {
		if err := pub.UseKeys(cfg.Keys.device()); err != nil {
			return err
		}
	}
	log := history.NewLog()
	t0 := time.Now()
	clock := newFrameClock(t0, int64(cfg.From+rgc.WindowBins), int64(cfg.To-1))
	// The drain waits as long as the settling: a fault near the replay's
	// end (a lease stream electing its leader) holds the group's last
	// decisions back for seconds, and the protocol lets them come late.
	rcfg := replay.Config{Rec: cfg.Rec, From: cfg.From, To: cfg.To, Cells: cfg.Cells, Speed: 1,
		DecisionTimeout: SettleTimeout, History: log,
		Progress: func(sent, _ int) { clock.progress(time.Now(), int64(cfg.From+sent)) }}
	fctx, stopFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		v.Unrecovered = t.applyAll(fctx, v.Faults, t0)
	}()
	res, err := replay.Run(ctx, pub, rcfg)
	stopFaults()
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Log, "seed %d: replay done: %d decisions, lost at least %d\n", v.Seed, res.Decisions, res.Lost)
	if err := cfg.Ref.SameStarts(res.Cells, res.Starts); err != nil {
		return err
	}
	v.Outages = outageSpans(v.Faults, t0, clock)
	v.History = history.CheckOutages(cfg.Ref, log.Received(), uint16(res.Epoch), v.Outages)
	v.Published, _ = log.Published()
	v.Fence, v.Resend = pub.FenceStats(), pub.SpikesResent()
	settleStart := time.Now()
	states, why, err := t.settle(ctx, settleStart.Add(SettleTimeout), int64(cfg.To-1))
	if err != nil {
		return err
	}
	v.Answered, v.Unsettled, v.Settle = len(states), why, time.Since(settleStart)
	if v.States, err = history.CompareStates(states); err != nil {
		return err
	}
	if cfg.Record != nil {
		v.Recording = t.audit(ctx)
	}
	return nil
}

// startInstance starts instance i (first start) with its proxies.
func (t *topology) startInstance(i int) error {
	in := &Instance{ID: "i" + strconv.Itoa(i)}
	var urls []string
	for _, n := range t.cluster.Nodes {
		p, err := NewProxy("127.0.0.1:" + strconv.Itoa(n.Client))
		if err != nil {
			return err
		}
		in.Proxies = append(in.Proxies, p)
		urls = append(urls, p.URL())
	}
	cells := make([]string, len(t.cfg.Cells))
	for k, c := range t.cfg.Cells {
		cells[k] = strconv.Itoa(c)
	}
	t.instances = append(t.instances, in)
	var opt []string
	if t.cfg.Record != nil {
		opt = []string{"--record", t.cfg.Record.Stream}
	}
	if t.cfg.Keys != nil {
		opt = append(opt, "--auth-keys", t.cfg.Keys.File)
	}
	return in.start(t.cfg.Predictord, filepath.Join(t.dir, in.ID+".log"), append(opt,
		"--model", t.cfg.Model, "--precision", t.cfg.Precision, "--nats-url", strings.Join(urls, ","),
		"--device", Device, "--cells", strings.Join(cells, ","), "--threads", strconv.Itoa(t.cfg.Threads),
		"--standby-group", Group, "--standby-id", in.ID, "--standby-ttl", t.cfg.TTL.String(),
		"--stim", t.cfg.Rec.StimMode.String())...)
}

// join waits until a started instance recovered the group; an instance
// that exited (predictord stops when JetStream still fails after its
// 30 s start-up wait, docs/operations.md "JetStream at start") is started
// again, up to 3 times.
func (t *topology) join(ctx context.Context, in *Instance) error {
	if err := t.cluster.WaitHealthy(ctx, 20*time.Second); err != nil {
		return err
	}
	for try := 0; ; try++ {
		deadline := time.Now().Add(20 * time.Second)
		err := t.recovered()
		for err != nil && in.Alive() && time.Now().Before(deadline) && ctx.Err() == nil {
			sleep(ctx, 50*time.Millisecond)
			err = t.recovered()
		}
		if err == nil || in.Alive() || try == 3 {
			return err
		}
		fmt.Fprintf(t.cfg.Log, "  %s exited while joining (%v); starting it again\n", in.ID, err)
		sleep(ctx, time.Second)
		if err := in.Restart(); err != nil {
			return err
		}
	}
}

// stop ends every process and proxy.
func (t *topology) stop() {
	for _, in := range t.instances {
		if in.Proc != nil {
			_ = in.Resume() // a paused process must run to die cleanly
			in.Kill()
		}
		for _, p := range in.Proxies {
			p.Close()
		}
	}
	if t.nc != nil {
		t.nc.Close()
	}
	if t.cluster != nil {
		t.cluster.Stop()
	}
}

// recovered reports whether every node is up and routed to every other,
// every instance up and synced, and exactly one holds the lease.
func (t *topology) recovered() error {
	for _, n := range t.cluster.Nodes {
		if !n.Alive() {
			return fmt.Errorf("node %s down", n.Name())
		}
	}
	for i, r := range t.cluster.Routes() {
		if r != len(t.cluster.Nodes)-1 {
			return fmt.Errorf("node %s routed to %d of %d others", t.cluster.Nodes[i].Name(), r, len(t.cluster.Nodes)-1)
		}
	}
	holders := 0
	for _, in := range t.instances {
		if !in.Alive() {
			return fmt.Errorf("instance %s down", in.ID)
		}
		if !in.Synced() {
			return fmt.Errorf("instance %s not synced", in.ID)
		}
		if in.Holder() {
			holders++
		}
	}
	if holders != 1 {
		return fmt.Errorf("%d holders", holders)
	}
	return nil
}

// waitRecovered waits until the topology recovered, at most timeout.
func (t *topology) waitRecovered(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if err := t.cluster.WaitHealthy(ctx, timeout); err != nil {
		return err
	}
	for {
		err := t.recovered()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// applyAll applies the faults one after the other, each after its gap and
// the previous one's recovery, until ctx ends; it returns the number of
// faults not recovered from in time.
func (t *topology) applyAll(ctx context.Context, faults []Fault, t0 time.Time) int {
	bad := 0
	for i := range faults {
		f := &faults[i]
		sleep(ctx, f.Gap)
		if ctx.Err() != nil {
			f.Skipped = "the replay ended"
			continue
		}
		f.At, f.Skipped = time.Since(t0), ""
		if err := t.apply(ctx, f); err != nil {
			f.Skipped = err.Error()
		}
		f.Until = time.Since(t0)
		fmt.Fprintf(t.cfg.Log, "  %s\n", f)
		err := t.waitRecovered(ctx, 20*time.Second)
		switch {
		case err == nil:
			f.Recovered = time.Since(t0) - f.Until
		case ctx.Err() == nil:
			fmt.Fprintf(t.cfg.Log, "  not recovered after %s: %v\n", f.Kind, err)
			bad++
		}
	}
	return bad
}

// holder returns the instance holding the lease and a standby (nil when
// none).
func (t *topology) roles(pick int) (holder, standby *Instance) {
	var others []*Instance
	for _, in := range t.instances {
		if holder == nil && in.Holder() {
			holder = in
		} else {
			others = append(others, in)
		}
	}
	if len(others) > 0 {
		standby = others[pick%len(others)]
	}
	return holder, standby
}

// apply applies one fault and waits for its end.
func (t *topology) apply(ctx context.Context, f *Fault) error {
	holder, standby := t.roles(f.Pick)
	in := standby
	switch f.Kind {
	case KillHolder, PauseHolder, CutHolder, SlowLink:
		in = holder
	}
	switch f.Kind {
	case KillHolder, KillStandby, PauseHolder, PauseStandby, CutHolder, CutStandby, SlowLink:
		if in == nil {
			return fmt.Errorf("no %s", strings.SplitN(string(f.Kind), "-", 2)[1])
		}
		f.Target = in.ID
	}
	switch f.Kind {
	case KillHolder, KillStandby:
		in.Kill()
		sleep(ctx, f.For)
		return in.Restart()
	case PauseHolder, PauseStandby:
		if err := in.Pause(); err != nil {
			return err
		}
		sleep(ctx, f.For)
		return in.Resume()
	case CutHolder, CutStandby:
		in.Cut()
		sleep(ctx, f.For)
		in.Heal()
	case SlowLink:
		in.Slow(f.Latency)
		sleep(ctx, f.For)
		in.Heal()
	case KillNode, KillMetaLeader, KillLeaseLeader, KillRecordLeader:
		n, err := t.nodeFor(ctx, f)
		if err != nil {
			return err
		}
		f.Target = n.Name()
		n.Kill()
		sleep(ctx, f.For)
		return n.Restart()
	case Outage:
		f.Target = "every node"
		for _, n := range t.cluster.Nodes {
			n.Kill()
		}
		sleep(ctx, f.For)
		var errs []error
		for _, n := range t.cluster.Nodes {
			errs = append(errs, n.Restart())
		}
		return errors.Join(errs...)
	case PartitionNode:
		k := f.Pick % len(t.cluster.Nodes)
		f.Target = t.cluster.Nodes[k].Name()
		t.cluster.Partition(k)
		sleep(ctx, f.For)
		t.cluster.Heal()
	case Burst:
		return t.burst(f.Count, f.Pick)
	}
	return nil
}

// nodeFor returns the node a node fault kills.
func (t *topology) nodeFor(ctx context.Context, f *Fault) (*Node, error) {
	switch f.Kind {
	case KillMetaLeader:
		return t.cluster.MetaLeader()
	case KillLeaseLeader:
		return t.streamLeader(ctx, LeaseStream)
	case KillRecordLeader:
		if t.cfg.Record == nil {
			return nil, fmt.Errorf("no flight recorder")
		}
		return t.streamLeader(ctx, t.cfg.Record.Stream)
	}
	return t.cluster.Nodes[f.Pick%len(t.cluster.Nodes)], nil
}

// burst publishes n malformed messages on the device's frame and control
// subjects.
func (t *topology) burst(n, seed int) error {
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	buf := make([]byte, 64)
	for i := range n {
		for k := range buf {
			buf[k] = byte(r.Uint32())
		}
		subj := stream.StimSubject(Device)
		if i%2 == 1 {
			subj = stream.ControlSubject(Device)
		}
		if err := t.nc.Publish(subj, buf[:1+r.IntN(len(buf))]); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
	}
	return nil
}

// states asks every synced instance for its device state (daemon.Snapshot
// as JSON) and returns the answers.
func (t *topology) states(ctx context.Context) ([][]byte, error) {
	inbox := nats.NewInbox()
	sub, err := t.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("nemesis: states: %w", err)
	}
	defer sub.Unsubscribe()
	if err := t.nc.PublishRequest("rgcpred.standby."+Group+"."+Device+".state", inbox, nil); err != nil {
		return nil, fmt.Errorf("nemesis: states: %w", err)
	}
	var out [][]byte
	deadline := time.Now().Add(2 * time.Second)
	for len(out) < len(t.instances) {
		m, err := sub.NextMsgWithContext(deadlineCtx(ctx, deadline))
		if err != nil {
			break // the rest did not answer in time
		}
		out = append(out, m.Data)
	}
	return out, nil
}

func deadlineCtx(ctx context.Context, d time.Time) context.Context {
	c, cancel := context.WithDeadline(ctx, d)
	context.AfterFunc(c, cancel)
	return c
}
