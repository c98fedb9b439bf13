package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// standbyTTL is the lease TTL of the hot-standby tests.
const standbyTTL = 2 * time.Second

// standbyPeerWait is the hot-standby tests' GroupConfig.PeerWait: a first
// start waits that long for an instance with the group's state.
const standbyPeerWait = 300 * time.Millisecond

// replicaSvc is a service running as one instance of a standby group.
type replicaSvc struct {
	s  *Service
	nc *nats.Conn
	// kill cuts the instance off at once, as kill -9 would: its connection
	// closes without releasing the lease or draining.
	kill func()
	stop func()
}

func startReplica(t *testing.T, url string, cfg Config, id string) *replicaSvc {
	t.Helper()
	return startReplicaRecording(t, url, cfg, id, recorder.Config{})
}

// startReplicaRecording starts a replica that also runs the flight
// recorder rec (off when rec.Stream is empty).
func startReplicaRecording(t *testing.T, url string, cfg Config, id string, rec recorder.Config) *replicaSvc {
	t.Helper()
	return startReplicaTTL(t, url, cfg, id, rec, standbyTTL)
}

// startReplicaTTL starts a replica with lease TTL ttl that also runs the
// flight recorder rec (off when rec.Stream is empty).
func startReplicaTTL(t *testing.T, url string, cfg Config, id string, rec recorder.Config, ttl time.Duration) *replicaSvc {
	t.Helper()
	return startReplicaGroup(t, url, cfg, rec, standby.GroupConfig{Group: "g", ID: id, TTL: ttl, PeerWait: standbyPeerWait})
}

// startReplicaGroup starts a replica with the group configuration gc that
// also runs the flight recorder rec (off when rec.Stream is empty).
func startReplicaGroup(t *testing.T, url string, cfg Config, rec recorder.Config, gc standby.GroupConfig) *replicaSvc {
	t.Helper()
	id := gc.ID
	cfg.Devices = []string{"dev0"}
	cfg.Replica = true
	cfg.Log = zerolog.New(io.Discard)
	if testing.Verbose() && os.Getenv("STANDBY_LOG") != "" {
		cfg.Log = zerolog.New(os.Stderr)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, s.ConnOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopStandby, err := s.EnableJetStream(ctx, nc, JetStreamFeatures{Standby: gc, Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing that depends on the instance's own timing: replicas must
	// take the same decisions and send them in the same messages.
	for _, d := range s.devices {
		if c := d.core.Config(); !c.Replica || c.Gather > 1 || c.MaxLag != 0 || !c.WholeCalls {
			t.Fatalf("replica %s, device %s: replica %v, gather %d, max lag %d, whole calls %v; want a replica core",
				id, d.name, c.Replica, c.Gather, c.MaxLag, c.WholeCalls)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nc) }()
	checkFor(t, waitLimit, func() error { return awaited("service ready", s.Ready()) })
	var once sync.Once
	r := &replicaSvc{s: s, nc: nc}
	r.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			stopStandby()
			nc.Close()
		})
	}
	r.kill = func() {
		nc.Close()
		r.stop()
	}
	t.Cleanup(r.stop)
	return r
}

// waitLimit bounds the waits of checkFor in these tests.
const waitLimit = 60 * time.Second

// checkFor calls f every 5 ms until it returns nil, and fails the test
// with f's latest error if d passes first.
func checkFor(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaited returns nil when ok, else an error saying what is awaited.
func awaited(what string, ok bool) error {
	if ok {
		return nil
	}
	return errors.New("waiting for " + what)
}

// TestStandbyFailover: two instances of a group serve one device; the
// holder is cut off mid-stream (and, in one case, the standby joined
// late and caught up from the holder's state; in another, a forged
// position was published on the decision subject first; in another, both
// instances have the same id). The device receives every decision exactly
// once, and the spikes equal the offline rollout's. The worst lateness
// (receipt minus the frame's send time) is logged.
func TestStandbyFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("hot-standby failover waits for a lease TTL")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	cases := []struct {
		name  string
		fault string // "kill", "late" (b joins late, then the holder is killed), "restart" (the NATS server)
	}{
		{"holder killed", "kill"},
		{"late joiner takes over", "late"},
		{"nats server restart", "restart"},
		// The forged header, then the same with the group's scope
		// (a forger who read the holder's headers); then the holder dies.
		{"forged position, then holder killed", "forged"},
		{"same id, then holder killed", "same id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own server and group, and mostly waits
			f := getFixtureStagger(t, true)
			dir := t.TempDir()
			srv := embedtest.JetStreamServer(t, embednats.Options{StoreDir: dir})
			e := &env{srv: srv, url: srv.ClientURL()}
			cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}
			a := startReplica(t, e.url, cfg, "a")
			checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
			var b *replicaSvc
			bID := "b"
			if c.fault == "same id" {
				bID = "a"
			}
			if c.fault != "late" {
				b = startReplica(t, e.url, cfg, bID)
			}

			p := newPublisher(t, e, "dev0")
			type got struct {
				d  stream.Decision
				at time.Time
			}
			var mu sync.Mutex
			var recv []got
			sent := map[int64]time.Time{}
			forgedSent, undecodable := 0, 0
			sub, err := p.SubscribeDecisions(func(ds *stream.Decisions, err error) {
				if err != nil {
					mu.Lock()
					undecodable++
					mu.Unlock()
					return
				}
				now := time.Now()
				mu.Lock()
				for _, d := range ds.Decisions {
					recv = append(recv, got{d, now})
				}
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := p.SendHistory(f.histories()); err != nil {
				t.Fatal(err)
			}
			const chunk = 8
			n := (f.hi - f.lo + chunk - 1) / chunk
			for i, lo := 0, f.lo; lo < f.hi; i, lo = i+1, lo+chunk {
				switch {
				case c.fault == "late" && i == n/4:
					t0 := time.Now()
					b = startReplica(t, e.url, cfg, "b")
					checkFor(t, waitLimit, func() error { return awaited("b caught up", b.s.devices[0].sb.Synced()) })
					t.Logf("b started and caught up in %v", time.Since(t0))
				case c.fault == "forged" && i == n/4:
					for _, h := range []nats.Header{
						{stream.PosHeader: {"4294967295.9223372036854775807.2147483647"}},
						{stream.PosHeader: {"4294967295.9223372036854775807.2147483647"}, stream.GroupHeader: {standby.Scope("g", 0, 1)}},
						{stream.PosHeader: {"1.9000000000.0"}, stream.GroupHeader: {standby.Scope("g", 0, 1)}},
					} {
						if err := p.Conn().PublishMsg(&nats.Msg{Subject: stream.SpikesSubject("dev0"), Header: h, Data: []byte("x")}); err != nil {
							t.Fatal(err)
						}
						mu.Lock()
						forgedSent++
						mu.Unlock()
					}
				case c.fault == "restart" && i == n/2:
					// The device holds its frames while the server is down (a
					// frame published then reaches only the subscribers back
					// before it): it waits until the decisions of the frames
					// it sent are in before the server stops.
					for _, r := range []*replicaSvc{a, b} {
						d := r.s.devices[0]
						checkFor(t, waitLimit, func() error {
							return awaited("the frames sent processed", d.last.Load() >= int64(lo-1) && !d.progress.busy())
						})
						if err := r.nc.FlushTimeout(10 * time.Second); err != nil {
							t.Fatal(err)
						}
					}
					for k, since := -1, time.Now(); time.Since(since) < 200*time.Millisecond; time.Sleep(10 * time.Millisecond) {
						mu.Lock()
						if len(recv) != k {
							k, since = len(recv), time.Now()
						}
						mu.Unlock()
					}
					port := srv.Addr().(*net.TCPAddr).Port
					in := srv.GlobalAccount().Interest(stream.StimSubject("dev0"))
					out := srv.GlobalAccount().Interest(stream.SpikesSubject("dev0"))
					srv.Shutdown()
					srv.WaitForShutdown()
					srv = embedtest.JetStreamServer(t, embednats.Options{Port: port, StoreDir: dir})
					checkFor(t, waitLimit, func() error {
						return awaited("every client reconnected and subscribed", a.nc.IsConnected() && b.nc.IsConnected() && p.Conn().IsConnected() &&
							srv.GlobalAccount().Interest(stream.StimSubject("dev0")) >= in &&
							srv.GlobalAccount().Interest(stream.SpikesSubject("dev0")) >= out)
					})
					for _, nc := range []*nats.Conn{a.nc, b.nc, p.Conn()} {
						if err := nc.FlushTimeout(10 * time.Second); err != nil {
							t.Fatal(err)
						}
					}
				case c.fault != "restart" && i == n/2:
					a.kill()
				}
				hi := min(lo+chunk, f.hi)
				mu.Lock()
				sent[int64(hi-1)] = time.Now()
				mu.Unlock()
				if err := p.PublishFrames(f.frames(lo, hi)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			survivor := b
			if c.fault == "restart" {
				survivor = a
			}
			checkFor(t, waitLimit, func() error {
				st, _ := survivor.s.StandbyStatus()
				return awaited("the survivor holds the lease", st.Held)
			})
			want := 0
			for _, w := range f.want {
				want += len(w)
			}
			checkFor(t, waitLimit, func() error {
				mu.Lock()
				defer mu.Unlock()
				k := 0
				for _, g := range recv {
					if g.d.Kind == stream.KindSpike && g.d.Bin < int64(f.hi) {
						k++
					}
				}
				if k < want {
					return fmt.Errorf("%d of %d spikes received", k, want)
				}
				return nil
			})
			time.Sleep(standbyTTL) // a duplicate would arrive by now
			mu.Lock()
			defer mu.Unlock()
			type key struct {
				cell int32
				end  int64
			}
			seen := map[key]int{}
			var ds []stream.Decision
			var worst time.Duration
			for _, g := range recv {
				k := key{g.d.Cell, g.d.End}
				seen[k]++
				if seen[k] == 2 {
					t.Errorf("decision of cell %d at %d received twice", k.cell, k.end)
				}
				ds = append(ds, g.d)
				// The frames message holding End was sent at the latest at
				// the send time of the message ending at or after End.
				for s := g.d.End; s < g.d.End+chunk; s++ {
					if at, ok := sent[s]; ok {
						worst = max(worst, g.at.Sub(at))
						break
					}
				}
			}
			sameSpikes(t, spikesBefore(ds, f.hi), f.want)
			// With silence published, every window of every cell is decided:
			// consecutive decisions of a cell chain End to the previous Bin.
			last := map[int32]int64{}
			for _, d := range ds {
				if prev, ok := last[d.Cell]; ok && d.End != prev {
					t.Fatalf("cell %d: decision at %d follows one whose next window ends at %d: a gap or disorder", d.Cell, d.End, prev)
				}
				last[d.Cell] = d.Bin
			}
			if undecodable != forgedSent {
				t.Errorf("%d undecodable decisions messages, want the %d forged", undecodable, forgedSent)
			}
			if c.fault == "forged" {
				// The holder's and b's gates ignored the forged positions.
				for _, r := range []*replicaSvc{a, b} {
					gs := r.s.devices[0].sb.Gate().Stats()
					if gs.Ahead+gs.Foreign == 0 {
						t.Errorf("gate stats %+v: the forged positions not counted", gs)
					}
				}
			}
			// b found a holder at its start (with the same id too), so it
			// caught up from the holder's state once (in the first case a
			// state before any frame).
			if r := b.s.devices[0].sb.Restores(); r != 1 {
				t.Fatalf("b restored the holder's state %d times, want 1", r)
			}
			st, _ := survivor.s.StandbyStatus()
			if st.Holder != survivor.s.group.Config().ID {
				t.Fatalf("survivor's lease status %+v", st)
			}
			if v := gathered(t, survivor.s, "predictord_standby_holder"); v != 1 {
				t.Fatalf("survivor's holder gauge %v, want 1", v)
			}
			// One server: the lease bucket has 1 replica, 1 wanted, none short.
			if v, short := gathered(t, survivor.s, "predictord_standby_lease_replicas"), gathered(t, survivor.s, "predictord_standby_lease_replicas_short"); v != 2 || short != 0 {
				t.Fatalf("lease replicas gauges (has + wanted) %v, short %v; want 2, 0", v, short)
			}
			if v := gathered(t, b.s, "predictord_standby_synced"); v != 1 {
				t.Fatalf("b's synced gauge %v, want 1", v)
			}
			// Replicas that saw the same frames never find each other
			// diverged, and none refused a state or a lease entry.
			for _, r := range []*replicaSvc{a, b} {
				for reason, n := range r.s.group.Alarms() {
					if n != 0 {
						t.Errorf("%s: %d %s alarms", r.s.group.Config().ID, n, reason)
					}
				}
			}
			series := map[string]int{}
			mfs, err := survivor.s.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				series[mf.GetName()] = len(mf.GetMetric())
			}
			if series["predictord_standby_alarms_total"] != len(standby.AlarmReasons) || series["predictord_standby_messages_total"] != 8 ||
				series["predictord_standby_echo_messages_total"] != 3 || series["predictord_standby_gap_copies_total"] != 1 {
				t.Errorf("alarm series %d, message fates %d, echo fates %d, gap copies %d: want every reason and fate exported from 0",
					series["predictord_standby_alarms_total"], series["predictord_standby_messages_total"],
					series["predictord_standby_echo_messages_total"], series["predictord_standby_gap_copies_total"])
			}
			t.Logf("%d decisions, each once; spikes equal the offline rollout; worst lateness %v (TTL %v); fence %+v",
				len(ds), worst, standbyTTL, p.FenceStats())
		})
	}
}

// TestStandbyStaleHolder: an instance that starts while the lease names an
// instance that died cannot catch up from anyone; once the lease is free
// and no instance with the group's state answered for PeerWait it goes on
// from its own state, takes the lease and publishes.
func TestStandbyStaleHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for lease TTLs")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	f := getFixtureStagger(t, true)
	srv, _, js := embedtest.JetStream(t, embednats.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := standby.LeaseBucket(ctx, js, standby.DefaultBucket, standbyTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "g", []byte(`{"holder":"dead"}`)); err != nil {
		t.Fatal(err)
	}
	b := startReplica(t, srv.ClientURL(), Config{Load: fakeLoader(f.ids), PublishSilence: true, Stagger: true}, "b")
	if b.s.devices[0].sb.Synced() {
		t.Fatal("b synced at once although the lease named another holder")
	}
	checkFor(t, waitLimit, func() error { st, _ := b.s.StandbyStatus(); return awaited("b holds the lease", st.Held) })
	e := &env{srv: srv, url: srv.ClientURL()}
	p := newPublisher(t, e, "dev0")
	c := collectAll(t, p)
	publishSplit(t, f, p, 16, nil)
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
}

// TestStandbyWedgedHolder: the holder's model call hangs mid-stream; the
// holder stops renewing its lease, the standby takes over, and the device
// receives every decision once. When the call returns, the old holder
// finds the lease taken and stays a standby.
func TestStandbyWedgedHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a lease TTL")
	}
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}
	hung := fakepred.NewGate(fakepred.New(f.ids))
	acfg := cfg
	acfg.Load = func(string, int) (*Model, error) { return &Model{Predictor: hung, Cells: f.ids, Name: "fake"}, nil }
	a := startReplica(t, e.url, acfg, "a")
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hung.Release) }) }) // before a stops
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	b := startReplica(t, e.url, cfg, "b")
	checkFor(t, waitLimit, func() error { return awaited("b synced", b.s.devices[0].sb.Synced()) })
	p := newPublisher(t, e, "dev0")
	c := collectAll(t, p)
	n := (f.hi - f.lo + 15) / 16
	publishSplit(t, f, p, 16, func(i int) {
		if i == n/2 {
			hung.Armed.Store(true)
		}
	})
	<-hung.Entered
	checkFor(t, waitLimit, func() error { st, _ := b.s.StandbyStatus(); return awaited("b holds the lease", st.Held) })
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	release.Do(func() { close(hung.Release) })
	checkFor(t, waitLimit, func() error {
		st, _ := a.s.StandbyStatus()
		return awaited("a knows it lost the lease", !st.Held && st.Holder == "b")
	})
	time.Sleep(500 * time.Millisecond) // a's late decisions, if it published any, arrive by now
	type key struct {
		cell int32
		end  int64
	}
	seen := map[key]bool{}
	for _, d := range c.Decisions() {
		k := key{d.Cell, d.End}
		if seen[k] {
			t.Fatalf("decision of cell %d at %d received twice", k.cell, k.end)
		}
		seen[k] = true
	}
	if st, _ := b.s.StandbyStatus(); !st.Held {
		t.Fatalf("b's lease status %+v after a recovered, want held", st)
	}
}

// TestStandbyStartBesideSyncedPeer: an instance that starts while the
// lease entry is absent and a synced instance of its group is alive (here
// one whose lease lives in another bucket, so the entry stays absent)
// catches up first: it does not take the lease with its fresh state while
// the peer answers, and goes on from its own state once the peer is gone.
func TestStandbyStartBesideSyncedPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for several PeerWaits")
	}
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	cfg := Config{Load: fakeLoader(f.ids), PublishSilence: true, Stagger: true}
	a := startReplicaGroup(t, e.url, cfg, recorder.Config{},
		standby.GroupConfig{Group: "g", ID: "a", TTL: standbyTTL, PeerWait: standbyPeerWait, Bucket: "elsewhere"})
	checkFor(t, waitLimit, func() error { return awaited("a synced", a.s.devices[0].sb.Synced()) })
	b := startReplica(t, e.url, cfg, "b")
	if !b.s.group.Late() || b.s.devices[0].sb.Synced() {
		t.Fatalf("b late %v, synced %v beside a synced peer: want to catch up first", b.s.group.Late(), b.s.devices[0].sb.Synced())
	}
	time.Sleep(5 * standbyPeerWait)
	if st, _ := b.s.StandbyStatus(); st.Held || b.s.devices[0].sb.Synced() {
		t.Fatalf("b holds the lease (%v) or synced (%v) with a fresh state while a synced peer answers", st.Held, b.s.devices[0].sb.Synced())
	}
	a.stop()
	checkFor(t, waitLimit, func() error { st, _ := b.s.StandbyStatus(); return awaited("b holds the lease", st.Held) })
	if n := b.s.devices[0].sb.Restores(); n != 0 {
		t.Fatalf("%d restores from a peer in another bucket", n)
	}
}
