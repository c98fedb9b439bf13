package standby

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"rgcpred/serve/jsreplicas"
	"rgcpred/serve/jsstart"
	"rgcpred/stream"
)

// GroupConfig configures one instance of a replica group.
type GroupConfig struct {
	// Group names the replica group (the lease's key): every instance
	// serving the same devices and cells with the same model uses it.
	Group string
	// ID identifies this instance in the group (default: host, pid and a
	// random suffix).
	ID string
	// Bucket is the JetStream key-value bucket of the leases (default
	// DefaultBucket).
	Bucket string
	// TTL is the lease's time to live (default DefaultTTL): a holder that
	// stops renewing (killed, stalled, cut off) is replaced within about
	// TTL plus TTL/10.
	TTL time.Duration
	// Buffer is the number of messages per device a standby keeps until it
	// sees the holder's copy (default 16384, 16 s of one message per frame
	// at 1 kHz); a takeover after a longer silence of the holder loses the
	// oldest.
	Buffer int
	// SyncEvery is how often a joining replica asks for the holder's state
	// until it gets a usable one (default 250 ms).
	SyncEvery time.Duration
	// PeerWait is how long an instance without the group's state asks for
	// an instance with it (PeersSubject) before it may go on from its own
	// state: at start with the lease entry absent, and while catching up
	// with the lease free (default DefaultPeerWait).
	PeerWait time.Duration
	// Scope is the GroupHeader value of this instance's messages (Scope).
	Scope string
	// Healthy, if not nil, must report true for the holder to renew
	// (LeaseConfig.Healthy).
	Healthy func() bool
	// Log receives the protocol's events; Warn its repeated warnings
	// (keyed, for a rate limiter; nil: Log).
	// Each failed try at start-up that NewGroup retries (JetStream not
	// answering yet) is a warning of key WarnStart.
	Log  zerolog.Logger
	Warn func(key string, err error)
	// Auth, if not nil, signs the lease value, state answers and digests
	// of this instance and verifies the others' (NewKeyAuth: the group's
	// key).
	Auth Authenticator
	// DeviceAuth, if not nil, returns a device's Down key (nil: none):
	// its gate signs the decisions and events it publishes, and positions
	// observed without a valid authenticator are ignored.
	DeviceAuth func(device string) *stream.Auth
	// DeviceUp, if not nil, returns a device's Up key (nil: none): the
	// holder answers only the device's decisions resend requests
	// authenticated with it, each sent later than the last one.
	DeviceUp func(device string) *stream.Auth
	// StartWait bounds how long NewGroup retries, with backoff, opening
	// the lease bucket and reading the lease while JetStream cannot
	// answer yet, or the cluster cannot place Replicas yet (default
	// DefaultStartWait).
	StartWait time.Duration
	// Replicas is the lease bucket's intended replica count (default
	// jsreplicas.Max when the NATS server is one of a cluster, else 1):
	// NewGroup creates the bucket with them, or raises an existing
	// bucket's to them; one with more keeps its own.
	Replicas int
}

// WarnStart is the key of GroupConfig.Warn's warnings of a failed try at
// start-up, retried (jsstart.Retry; jsstart.Reason names why).
const WarnStart = "standby/start"

// DefaultBucket is GroupConfig.Bucket's default.
const DefaultBucket = "rgcpred_standby"

// Group is one instance of a replica group: the lease, and a Replica per
// served device. Add the devices, then Start.
type Group struct {
	cfg      GroupConfig
	nc       *nats.Conn
	lease    *Lease
	replicas []*Replica
	late     bool
	placed   jsreplicas.Placement
	subs     []*nats.Subscription
	alarms   alarms

	ctx    context.Context
	cancel context.CancelFunc
	wgMu   sync.Mutex // wg.Add after stop's Wait began would race
	wg     sync.WaitGroup
	once   sync.Once
}

// NewGroup opens the lease bucket of cfg on nc and prepares the lease,
// retrying with backoff for up to cfg.StartWait while JetStream cannot
// answer yet (a node starting, no meta leader elected). An
// instance that finds any holder (even one with its own id: another
// process, or its predecessor) catches up with the holder's state before
// it may take over. So does one that finds the lease entry absent while
// an instance with the group's state answers within cfg.PeerWait (a
// holder whose holding lapsed, a synced standby): only when none answers
// (the group's first start, or every instance with the state gone) does
// it start from a fresh state.
func NewGroup(ctx context.Context, nc *nats.Conn, cfg GroupConfig) (*Group, error) {
	if cfg.Group == "" {
		return nil, errors.New("standby: group without a name")
	}
	if err := stream.CheckDevice(cfg.Group); err != nil {
		return nil, fmt.Errorf("standby: group: %w", err)
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuid.Next()[:6]
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 14
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = 250 * time.Millisecond
	}
	if cfg.StartWait <= 0 {
		cfg.StartWait = DefaultStartWait
	}
	if cfg.PeerWait <= 0 {
		cfg.PeerWait = DefaultPeerWait
	}
	if cfg.Warn == nil {
		log := cfg.Log
		cfg.Warn = func(_ string, err error) { log.Warn().Err(err).Send() }
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("standby: %w", err)
	}
	warn := func(err error) {
		cfg.Warn(WarnStart, fmt.Errorf("standby: JetStream not ready yet (%s), retrying: %w", jsstart.Reason(err), err))
	}
	kv, placed, err := openLeaseBucket(ctx, js, cfg.Bucket, cfg.TTL, max(cfg.Replicas, 0), cfg.StartWait, warn)
	if err != nil {
		return nil, err
	}
	cfg.Replicas = placed.Want // the default known once connected (jsstart.Intended)
	logPlacement(cfg, placed)
	g := &Group{cfg: cfg, nc: nc, placed: placed}
	if err := jsstart.Retry(ctx, cfg.StartWait, warn, func(ctx context.Context) error {
		_, err := kv.Get(ctx, cfg.Group)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil
		}
		g.late = err == nil
		return err
	}); err != nil {
		return nil, fmt.Errorf("standby: read lease %s: %w", cfg.Group, err)
	}
	g.lease, err = NewLease(LeaseConfig{KV: kv, Key: cfg.Group, Holder: cfg.ID, TTL: cfg.TTL,
		Eligible: g.synced, Healthy: cfg.Healthy, Auth: cfg.Auth,
		OnForeign: func(err error) { g.alarm(AlarmLease, "", err) },
		Recreate: func(ctx context.Context) (jetstream.KeyValue, error) {
			kv, _, err := leaseBucket(ctx, js, cfg.Bucket, cfg.TTL, cfg.Replicas, 1)
			return kv, err
		},
		OnGain: g.gain, OnLoss: g.loss, OnRenew: g.retry})
	if err != nil {
		return nil, err
	}
	if !g.late {
		if g.late, err = g.peerSynced(ctx, cfg.PeerWait); err != nil {
			g.late = true // unknown: the catch-up asks again
			cfg.Warn("start", err)
		}
		if g.late {
			cfg.Log.Warn().Str("group", cfg.Group).
				Msg("standby: the lease is free but an instance with the group's state is alive: catching up from it first")
		}
	}
	return g, nil
}

// Config returns the configuration with its defaults filled in.
func (g *Group) Config() GroupConfig { return g.cfg }

// Lease returns the group's lease.
func (g *Group) Lease() *Lease { return g.lease }

// Placement returns the lease bucket's replicas at start-up against
// Config().Replicas, and why fewer, if so.
func (g *Group) Placement() jsreplicas.Placement { return g.placed }

// logPlacement states the lease bucket's replicas at start-up: a warning
// with the server's answer when the cluster placed fewer than wanted.
func logPlacement(cfg GroupConfig, p jsreplicas.Placement) {
	if p.Have >= p.Want {
		cfg.Log.Info().Str("bucket", cfg.Bucket).Int("replicas", p.Have).Int("wanted", p.Want).Msg("standby: lease bucket ready")
		return
	}
	cfg.Log.Warn().Str("bucket", cfg.Bucket).Int("replicas", p.Have).Int("wanted", p.Want).Str("reason", p.Reason()).AnErr("answer", p.Short).
		Msgf("standby: lease bucket ready with fewer replicas than wanted: the cluster did not place %d within %v "+
			"(fewer nodes than that, or not all current; a smaller cluster: set its size, predictord --standby-replicas)", p.Want, cfg.StartWait)
}

// Late reports whether another holder, or an instance with the group's
// state, was found at start: the replicas catch up before this instance
// may take over.
func (g *Group) Late() bool { return g.late }

// Replicas returns the devices' replicas, in the order added.
func (g *Group) Replicas() []*Replica { return g.replicas }

// StateSubject is the subject on which the group's instances ask for a
// device's state.
func StateSubject(group, device string) string {
	return "rgcpred.standby." + group + "." + device + ".state"
}

// Add makes device name (driven through dev) a replica: its decisions and
// events go through a gate publishing with this instance's lease revision,
// the holder's copies on the device's spikes and events subjects are
// observed, and state requests arrive on raw, the device's message
// channel (in order with its frames). Call it before Start.
func (g *Group) Add(name string, dev Device, raw chan *nats.Msg) (*Replica, error) {
	var auth *stream.Auth
	if g.cfg.DeviceAuth != nil {
		auth = g.cfg.DeviceAuth(name)
	}
	send := natsSender(g.nc, g.cfg.Scope, auth)
	gate, err := NewGate(func(subject string, pos stream.Pos, data []byte) error {
		return send(subject, pos, g.lease.Revision(), data)
	}, g.lease.Held, g.cfg.Buffer)
	if err != nil {
		return nil, err
	}
	if err := gate.SetEcho(Echo{Keep: g.cfg.Buffer, KeepBytes: EchoKeepBytes, Revision: g.lease.Revision, Publish: send,
		Generation: func() uint64 { return g.nc.Stats().Reconnects }}); err != nil {
		return nil, err
	}
	r := &Replica{group: g, dev: dev, name: name, gate: gate, raw: raw,
		stimSubj: stream.StimSubject(name), ctlSubj: stream.ControlSubject(name), eventSubj: stream.EventsSubject(name),
		digestSubj: DigestSubject(g.cfg.Group, name), digestBlock: -1}
	r.snapSubj = StateSubject(g.cfg.Group, name)
	r.applySubj = r.snapSubj + ".apply"
	r.synced.Store(!g.late)
	var up *stream.Auth
	if g.cfg.DeviceUp != nil {
		up = g.cfg.DeviceUp(name)
	}
	r.resend = newResender(g.nc, gate, g.cfg.Scope, up)
	obs, err := observeNATS(g.nc, gate, g.cfg.Scope, auth, func(err error) { g.cfg.Warn(name+"/standby", err) }, r.observed,
		stream.SpikesSubject(name), r.eventSubj)
	if err != nil {
		return nil, err
	}
	g.subs = append(g.subs, obs...)
	rsub, err := g.nc.Subscribe(stream.SpikesResendSubject(name), r.resend.handle)
	if err != nil {
		return nil, fmt.Errorf("standby: subscribe %s: %w", stream.SpikesResendSubject(name), err)
	}
	g.subs = append(g.subs, rsub)
	dsub, err := g.nc.Subscribe(r.digestSubj, r.holderDigest)
	if err != nil {
		return nil, fmt.Errorf("standby: subscribe %s: %w", r.digestSubj, err)
	}
	g.subs = append(g.subs, dsub)
	sub, err := g.nc.ChanSubscribe(r.snapSubj, raw)
	if err != nil {
		return nil, fmt.Errorf("standby: subscribe %s: %w", r.snapSubj, err)
	}
	g.subs = append(g.subs, sub)
	g.replicas = append(g.replicas, r)
	return r, nil
}

// Start answers the group's peers requests, runs the lease and catches
// the unsynced replicas up, until Stop.
func (g *Group) Start(ctx context.Context) {
	if sub, err := g.nc.Subscribe(PeersSubject(g.cfg.Group), g.answerPeers); err != nil {
		g.cfg.Warn("standby/peers", fmt.Errorf("standby: subscribe %s: %w", PeersSubject(g.cfg.Group), err))
	} else {
		g.subs = append(g.subs, sub)
	}
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.lease.Run(g.ctx, func(err error) { g.cfg.Warn("standby/lease", err) })
	}()
	for _, r := range g.replicas {
		if !r.synced.Load() {
			g.resync(r)
		}
	}
	g.cfg.Log.Info().Str("group", g.cfg.Group).Str("id", g.cfg.ID).Str("incarnation", g.lease.Incarnation()).
		Dur("ttl", g.cfg.TTL).Bool("catching_up", g.late).Msg("hot standby enabled")
}

// Stop ends the lease (released if held) and the catch-ups, and stops
// observing. Call it after the devices' last decisions went out.
func (g *Group) Stop() {
	g.once.Do(func() {
		g.wgMu.Lock()
		if g.cancel != nil {
			g.cancel()
		}
		g.wgMu.Unlock()
		g.wg.Wait()
		g.unsubscribe()
	})
}

// unsubscribe stops observing and taking state requests.
func (g *Group) unsubscribe() {
	for _, sub := range g.subs {
		_ = sub.Unsubscribe()
	}
}

// Close undoes Add when Start is not to be called (a failed set-up).
func (g *Group) Close() { g.unsubscribe() }

// synced reports whether every replica's state is the group's (and no
// restart of its own awaits the holder's): only then may this instance
// take the lease.
func (g *Group) synced() bool {
	for _, r := range g.replicas {
		if !r.synced.Load() || r.unconfirmed.Load() > 0 {
			return false
		}
	}
	return true
}

// gain makes every gate publish (OnGain).
func (g *Group) gain() {
	for _, r := range g.replicas {
		if err := r.gate.Gain(); err != nil {
			g.cfg.Log.Warn().Err(err).Str("device", r.name).Msg("standby: publish kept decisions at takeover")
		}
	}
	g.cfg.Log.Warn().Str("group", g.cfg.Group).Str("id", g.cfg.ID).Msg("standby: this instance holds the lease and publishes")
}

// retry publishes what the gates kept while the connection was down
// (OnRenew: the bucket answered, so the connection is back), and logs
// the messages published again since the last renewal because their
// echo never came.
func (g *Group) retry() {
	for _, r := range g.replicas {
		if err := r.gate.Retry(); err != nil && !errors.Is(err, ErrNotConnected) {
			g.cfg.Warn(r.name+"/standby", err)
		}
		if n := r.gate.Stats().Republished; n != r.republished {
			g.cfg.Log.Info().Str("device", r.name).Uint64("messages", n-r.republished).
				Msg("standby: published again what never came back from the server (written into a connection that died)")
			r.republished = n
		}
	}
}

// loss makes every gate keep its messages (OnLoss).
func (g *Group) loss() {
	for _, r := range g.replicas {
		r.gate.Lose()
	}
	g.cfg.Log.Warn().Str("group", g.cfg.Group).Str("id", g.cfg.ID).
		Msg("standby: this instance no longer holds the lease (lost or released) and stops publishing")
}

// resync starts a replica's catch-up, unless the group stopped.
func (g *Group) resync(r *Replica) {
	g.wgMu.Lock()
	defer g.wgMu.Unlock()
	if g.ctx == nil || g.ctx.Err() != nil {
		return
	}
	g.wg.Add(1)
	go func() { defer g.wg.Done(); r.catchUp(g.ctx) }()
}
