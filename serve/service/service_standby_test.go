package service

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// standbyTTL is the lease TTL of the hot-standby tests.
const standbyTTL = 2 * time.Second

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
	cfg.Devices = []string{"dev0"}
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
	stopStandby, err := s.EnableJetStream(ctx, nc, JetStreamFeatures{Standby: StandbyConfig{Group: "g", ID: id, TTL: standbyTTL}, Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing that depends on the instance's own timing: replicas must
	// take the same decisions and send them in the same messages.
	for _, d := range s.devices {
		if c := d.core.Config(); c.Gather != 0 || c.MaxLag != 0 || !c.WholeCalls {
			t.Fatalf("replica %s, device %s: gather %d, max lag %d, whole calls %v; want no gathering, no skipping, whole calls",
				id, d.name, c.Gather, c.MaxLag, c.WholeCalls)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nc) }()
	waitUntil(t, "service ready", s.Ready)
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

// waitUntil polls cond for up to 60 s and fails the test if it never holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntilWhy(t, what, func() (bool, string) { return cond(), "" })
}

// waitUntilWhy is waitUntil for a condition that says why it does not hold
// yet; a timeout reports the latest reason.
func waitUntilWhy(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (latest: %s)", what, why)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
			f := getFixtureStagger(t, true)
			dir := t.TempDir()
			srv, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
			e := &env{srv: srv, url: srv.ClientURL()}
			cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}
			a := startReplica(t, e.url, cfg, "a")
			waitUntil(t, "a holds the lease", func() bool { st, _ := a.s.StandbyStatus(); return st.Held })
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
					waitUntil(t, "b caught up", func() bool { return b.s.devices[0].sb.synced.Load() })
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
					// The device holds its frames while the server is down. A
					// standby group has no reconnect buffer (a decision seconds
					// late is worse than none), so decisions computed during the
					// outage are lost by design: the device waits until those of
					// the frames it sent are in before the server stops.
					for _, r := range []*replicaSvc{a, b} {
						d := r.s.devices[0]
						waitUntil(t, "the frames sent processed", func() bool { return d.last.Load() >= int64(lo-1) && d.handling.Load() == 0 })
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
					if srv, err = embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir}); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
					waitUntil(t, "every client reconnected and subscribed", func() bool {
						return a.nc.IsConnected() && b.nc.IsConnected() && p.Conn().IsConnected() &&
							srv.GlobalAccount().Interest(stream.StimSubject("dev0")) >= in &&
							srv.GlobalAccount().Interest(stream.SpikesSubject("dev0")) >= out
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
			waitUntil(t, "the survivor holds the lease", func() bool { st, _ := survivor.s.StandbyStatus(); return st.Held })
			want := 0
			for _, w := range f.want {
				want += len(w)
			}
			waitUntil(t, "every spike", func() bool {
				mu.Lock()
				defer mu.Unlock()
				k := 0
				for _, g := range recv {
					if g.d.Kind == stream.KindSpike && g.d.Bin < int64(f.hi) {
						k++
					}
				}
				return k >= want
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
					gs := r.s.devices[0].sb.gate.Stats()
					if gs.Ahead+gs.Foreign == 0 {
						t.Errorf("gate stats %+v: the forged positions not counted", gs)
					}
				}
			}
			// b found a holder at its start (with the same id too), so it
			// caught up from the holder's state once (in the first case a
			// state before any frame).
			if r := b.s.devices[0].sb.restores.Load(); r != 1 {
				t.Fatalf("b restored the holder's state %d times, want 1", r)
			}
			st, _ := survivor.s.StandbyStatus()
			if st.Holder != survivor.s.devices[0].sb.state.cfg.ID {
				t.Fatalf("survivor's lease status %+v", st)
			}
			if v := gathered(t, survivor.s, "predictord_standby_holder"); v != 1 {
				t.Fatalf("survivor's holder gauge %v, want 1", v)
			}
			if v := gathered(t, b.s, "predictord_standby_synced"); v != 1 {
				t.Fatalf("b's synced gauge %v, want 1", v)
			}
			t.Logf("%d decisions, each once; spikes equal the offline rollout; worst lateness %v (TTL %v); fence %+v",
				len(ds), worst, standbyTTL, p.FenceStats())
		})
	}
}

// TestStandbyStaleHolder: an instance that starts while the lease names an
// instance that died cannot catch up from anyone; once the lease has been
// free for two TTLs it goes on from its own state, takes the lease and
// publishes.
func TestStandbyStaleHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for lease TTLs")
	}
	f := getFixtureStagger(t, true)
	srv, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := standby.LeaseBucket(ctx, js, DefaultStandbyBucket, standbyTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "g", []byte(`{"holder":"dead"}`)); err != nil {
		t.Fatal(err)
	}
	b := startReplica(t, srv.ClientURL(), Config{Load: fakeLoader(f.ids), PublishSilence: true, Stagger: true}, "b")
	if b.s.devices[0].sb.synced.Load() {
		t.Fatal("b synced at once although the lease named another holder")
	}
	waitUntil(t, "b holds the lease", func() bool { st, _ := b.s.StandbyStatus(); return st.Held })
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
	waitUntil(t, "a holds the lease", func() bool { st, _ := a.s.StandbyStatus(); return st.Held })
	b := startReplica(t, e.url, cfg, "b")
	waitUntil(t, "b synced", func() bool { return b.s.devices[0].sb.synced.Load() })
	p := newPublisher(t, e, "dev0")
	c := collectAll(t, p)
	n := (f.hi - f.lo + 15) / 16
	publishSplit(t, f, p, 16, func(i int) {
		if i == n/2 {
			hung.Armed.Store(true)
		}
	})
	<-hung.Entered
	waitUntil(t, "b holds the lease", func() bool { st, _ := b.s.StandbyStatus(); return st.Held })
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	release.Do(func() { close(hung.Release) })
	waitUntil(t, "a knows it lost the lease", func() bool { st, _ := a.s.StandbyStatus(); return !st.Held && st.Holder == "b" })
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

// TestStandbyRestoreReplay: a standby restores the holder's state and
// replays the frames it retained past it, skipping what the state already
// holds, including a resent message wholly within it; it ends with the
// holder's state and marks itself synced only after the replay.
func TestStandbyRestoreReplay(t *testing.T) {
	f := getFixtureStagger(t, true)
	cfg := Config{Devices: []string{"dev0"}, Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true,
		Log: zerolog.New(io.Discard)}
	newDev := func() *device {
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s.devices[0]
	}
	must := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lo := f.lo
	cases := []struct {
		name   string
		frames [][2]int // retained frames messages [from, to) relative to lo; the state ends at frame 15
	}{
		{"in order", [][2]int{{0, 8}, {8, 16}, {16, 24}, {24, 32}}},
		{"straddling the state", [][2]int{{0, 12}, {12, 20}, {20, 32}}},
		{"a short message resent within the state", [][2]int{{0, 8}, {8, 16}, {16, 24}, {2, 6}, {24, 32}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			holder, sb := newDev(), newDev()
			g, err := standby.NewGate(func(string, standby.Pos, []byte) error { return nil }, func() bool { return false }, 1<<10)
			if err != nil {
				t.Fatal(err)
			}
			sb.sb.on, sb.sb.gate = true, g
			sb.sb.snapSubj, sb.sb.applySubj = "rgcpred.standby.g.dev0.state", "rgcpred.standby.g.dev0.state.apply"
			hist := &stream.Control{Op: stream.OpHistory, Histories: f.histories()}
			holder.core.Control(hist)
			sb.sb.retained = append(sb.sb.retained, &nats.Msg{Subject: sb.ctlSubj, Data: must(stream.AppendControl(nil, hist))})
			for _, fr := range c.frames {
				data := must(stream.AppendFrames(nil, f.frames(lo+fr[0], lo+fr[1])))
				sb.sb.retained = append(sb.sb.retained, &nats.Msg{Subject: sb.stimSubj, Data: data})
			}
			holder.core.Frames(f.frames(lo, lo+16), 0)
			snap, err := json.Marshal(holder.core.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			holder.core.Frames(f.frames(lo+16, lo+32), 0)
			sb.standbyMsg(&nats.Msg{Subject: sb.sb.applySubj, Data: snap})
			if !sb.sb.synced.Load() {
				t.Fatal("not synced after the restore")
			}
			if got, want := sb.core.LastSeq(), holder.core.LastSeq(); got != want {
				t.Fatalf("last seq %d after the replay, want the holder's %d", got, want)
			}
			a, _ := json.Marshal(sb.core.Snapshot())
			b, _ := json.Marshal(holder.core.Snapshot())
			if string(a) != string(b) {
				t.Fatal("state after the replay differs from the holder's")
			}
			if sb.sb.replaying {
				t.Fatal("still replaying")
			}
		})
	}
}

// TestStandbyStateBudget: a joining standby's retained messages are bounded
// by bytes, the newest kept; state requests wait on their own budget (a
// full control queue does not refuse them), only a synced instance takes
// them, one per stateEvery.
func TestStandbyStateBudget(t *testing.T) {
	s, err := New(Config{Devices: []string{"dev0"}, Load: fakeLoader([]int{1, 2}), Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	d := s.devices[0]
	d.sb.on = true
	d.sb.snapSubj, d.sb.applySubj = "rgcpred.standby.g.dev0.state", "rgcpred.standby.g.dev0.state.apply"

	big := make([]byte, 1<<20)
	for i := range maxRetainedBytes>>20 + 8 {
		d.standbySeen(&nats.Msg{Subject: d.stimSubj, Data: big[:len(big)-i]})
	}
	if d.sb.retainedBytes > maxRetainedBytes {
		t.Fatalf("%d bytes retained, want at most %d", d.sb.retainedBytes, maxRetainedBytes)
	}
	n := 0
	for _, m := range d.sb.retained {
		n += len(m.Data)
	}
	if n != d.sb.retainedBytes || len(d.sb.retained[len(d.sb.retained)-1].Data) != len(big)-(maxRetainedBytes>>20+7) {
		t.Fatalf("retained %d bytes (counted %d); the newest message not last", n, d.sb.retainedBytes)
	}

	history, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpHistory, Histories: make([]stream.History, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for range ctlQueueLen { // valid ones: the reader refuses others before they are queued
		d.enqueue(&nats.Msg{Subject: d.ctlSubj, Data: history})
	}
	if d.queuedCtl.Load() != ctlQueueLen {
		t.Fatalf("%d control messages queued, want a full queue of %d", d.queuedCtl.Load(), ctlQueueLen)
	}
	request := &nats.Msg{Subject: d.sb.snapSubj, Reply: "_INBOX.x"}
	steps := []struct {
		name   string
		synced bool
		wait   time.Duration
		queued int // work items after the step
	}{
		{"unsynced: not taken", false, 0, ctlQueueLen},
		{"synced: taken past a full control queue", true, 0, ctlQueueLen + 1},
		{"second within the rate: refused", true, 0, ctlQueueLen + 1},
		{"after the rate, one still waiting: refused", true, stateEvery + time.Millisecond, ctlQueueLen + 1},
	}
	for _, st := range steps {
		d.sb.synced.Store(st.synced)
		time.Sleep(st.wait)
		d.enqueue(request)
		if len(d.work) != st.queued {
			t.Fatalf("%s: %d items queued, want %d", st.name, len(d.work), st.queued)
		}
	}
	if got := d.rejectedBy["state_request_limited"]; got != 2 {
		t.Fatalf("%d state requests counted as limited, want 2", got)
	}
	for len(d.work) > 0 {
		d.dequeued(<-d.work)
	}
	time.Sleep(stateEvery + time.Millisecond)
	d.enqueue(request)
	if len(d.work) != 1 {
		t.Fatalf("after the queue drained and the rate passed: %d items queued, want 1", len(d.work))
	}
}
