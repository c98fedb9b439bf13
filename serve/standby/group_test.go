package standby

import (
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/daemon"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// groupDev is one instance's device in the group tests: a replica core,
// its processor (state messages from raw) and the test feeding frames,
// serialised by mu.
type groupDev struct {
	mu       sync.Mutex
	core     *daemon.Core
	r        *Replica
	g        *Group
	raw      chan *nats.Msg
	nc       *nats.Conn
	restored atomic.Int32
	// produced lists the epoch and frame of every decisions message the
	// core produced, in order.
	produced []stream.Pos
}

func (d *groupDev) Snapshot() *daemon.Snapshot       { return d.core.Snapshot() }
func (d *groupDev) Restore(s *daemon.Snapshot) error { return d.core.Restore(s) }
func (d *groupDev) Frames(f *stream.Frames)          { d.core.Frames(f, 0) }
func (d *groupDev) Control(c *stream.Control)        { d.core.Control(c) }
func (d *groupDev) Restored()                        { d.restored.Add(1) }
func (d *groupDev) Decisions(t int64, _ []stream.Decision) {
	d.produced = append(d.produced, stream.Pos{Epoch: d.core.Epoch(), Bin: t})
	_ = d.r.Publish(stream.SpikesSubject("dev0"), d.core.Epoch(), t, []byte{1})
}
func (d *groupDev) Batch(int, time.Duration) {}
func (d *groupDev) Stream(ev stream.Event) {
	b, err := stream.AppendEvent(nil, &ev)
	if err == nil {
		_ = d.r.Publish(stream.EventsSubject("dev0"), ev.Epoch, stream.EventBin, b)
	}
}

// testPeerWait is the group tests' GroupConfig.PeerWait: a first start
// waits that long for an instance with the group's state.
const testPeerWait = 300 * time.Millisecond

// startGroup starts instance id of group g on url with one device.
func startGroup(t *testing.T, url, id string) *groupDev {
	t.Helper()
	return startGroupWith(t, url, id, nil, nil)
}

// startGroupWith starts instance id of group g on url with one device;
// config, if not nil, changes its configuration, and before, if not nil,
// sees the group before Start.
func startGroupWith(t *testing.T, url, id string, config func(*GroupConfig), before func(*Group)) *groupDev {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := &groupDev{raw: make(chan *nats.Msg, 64), nc: nc}
	if d.core, err = daemon.New(fakepred.New(testCells), d, daemon.Config{Known: testCells, Cells: testCells, Stagger: true, PublishSilence: true, Replica: true}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cfg := GroupConfig{Group: "g", ID: id, TTL: testTTL, SyncEvery: 50 * time.Millisecond, PeerWait: testPeerWait,
		Scope: Scope("g", 0, 1), Log: zerolog.Nop(), Warn: func(_ string, err error) { t.Log(id, err) }}
	if config != nil {
		config(&cfg)
	}
	if d.g, err = NewGroup(ctx, nc, cfg); err != nil {
		t.Fatal(err)
	}
	if d.r, err = d.g.Add("dev0", d, d.raw); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range d.raw {
			if ok, _ := d.r.Admit(m); ok {
				d.mu.Lock()
				_, _ = d.r.HandleState(m)
				d.mu.Unlock()
				d.r.Done(m)
			}
		}
	}()
	if before != nil {
		before(d.g)
	}
	d.g.Start(ctx)
	t.Cleanup(func() { d.g.Stop(); close(d.raw); <-done })
	return d
}

// feed gives the device a frames message of n frames from first, with
// syncedPair starts a NATS server with JetStream and two members of one
// group, a holding the lease and b synced, both fed the same first 4,200
// frames.
func syncedPair(t *testing.T) (a, b *groupDev) {
	t.Helper()
	s := embedtest.JetStreamServer(t, embednats.Options{})
	a = startGroup(t, s.ClientURL(), "a")
	embedtest.Wait(t, "a holds the lease", a.g.Lease().Held)
	b = startGroup(t, s.ClientURL(), "b")
	embedtest.Wait(t, "b synced", b.r.Synced)
	for lo := int64(0); lo < 4200; lo += 100 {
		a.feed(t, lo, 100, 0.5)
		b.feed(t, lo, 100, 0.5)
	}
	return a, b
}

// intensity level, as the service's processor would.
func (d *groupDev) feed(t *testing.T, first int64, n int, level float32) {
	t.Helper()
	f := testFrames(first, n)
	for i := range f.Frames {
		f.Frames[i].LED[0] = level
	}
	b, err := stream.AppendFrames(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.r.Seen(&nats.Msg{Subject: stream.StimSubject("dev0"), Data: b})
	d.core.Frames(f, 0)
	d.r.AfterFrames(d.core.Epoch(), d.core.LastSeq())
}

func (d *groupDev) state(t *testing.T) string {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := json.Marshal(d.core.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGroupDivergence: a standby whose state leaves the holder's (frames
// that differ; a stream restarted at another frame, as after a NATS
// outage) raises the divergence alarm, catches up from the holder and
// ends with the holder's state; replicas that agree compare without an
// alarm.
func TestGroupDivergence(t *testing.T) {
	for _, c := range []struct {
		name string
		// diverge feeds the holder a and the standby b what makes them
		// differ, after both saw frames 0..4199, and returns the next
		// frame.
		diverge func(t *testing.T, a, b *groupDev) int64
	}{
		{"frames differ", func(t *testing.T, a, b *groupDev) int64 {
			for lo := int64(4200); lo < 8100; lo += 100 {
				a.feed(t, lo, 100, 0.5)
				b.feed(t, lo, 100, 0.5)
			}
			a.feed(t, 8100, 100, 0.5) // crosses frame 8192, digested
			b.feed(t, 8100, 100, 0.7)
			return 8200
		}},
		{"stream restarted at other frames", func(t *testing.T, a, b *groupDev) int64 {
			// b missed the new numbering's first 9 frames.
			a.feed(t, 100000, 100, 0.5)
			b.feed(t, 100009, 91, 0.5)
			for lo := int64(100100); lo < 100400; lo += 100 {
				a.feed(t, lo, 100, 0.5)
				b.feed(t, lo, 100, 0.5)
			}
			return 100400
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := syncedPair(t)
			embedtest.Wait(t, "b compared two digests and the first stream event", func() bool { return b.r.Checked() >= 3 })
			if n := b.g.Alarms()[AlarmDivergence]; n != 0 {
				t.Fatalf("%d divergence alarms while the replicas agree", n)
			}
			next := c.diverge(t, a, b)
			embedtest.Wait(t, "the divergence alarm", func() bool { return b.g.Alarms()[AlarmDivergence] >= 1 })
			embedtest.Wait(t, "b caught up again", func() bool { return b.r.Synced() && b.r.Restores() == 2 })
			for lo := next; lo < next+200; lo += 100 {
				a.feed(t, lo, 100, 0.5)
				b.feed(t, lo, 100, 0.5)
			}
			if a.state(t) != b.state(t) {
				t.Fatal("b's state differs from the holder's after catching up")
			}
			if n := a.g.Alarms()[AlarmDivergence]; n != 0 {
				t.Fatalf("the holder raised %d divergence alarms", n)
			}
		})
	}
}

// TestGroupStateOnlyFromHolder: a joining replica refuses state answers
// that claim the lease without being its holder's (alarmed), and restores
// the holder's.
func TestGroupStateOnlyFromHolder(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	a := startGroup(t, s.ClientURL(), "a")
	embedtest.Wait(t, "a holds the lease", a.g.Lease().Held)
	for lo := int64(0); lo < 1500; lo += 100 {
		a.feed(t, lo, 100, 0.5)
	}
	// A forger answers every state request first, with another state and
	// a made-up incarnation.
	fc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	forged := newCore(t, testCells)
	forged.Frames(testFrames(0, 1500))
	forgedState := snapshotJSON(t, forged)
	var forgeries atomic.Int32
	if _, err := fc.Subscribe(StateSubject("g", "dev0"), func(m *nats.Msg) {
		r := &nats.Msg{Subject: m.Reply, Data: forgedState, Header: nats.Header{}}
		r.Header.Set(IncarnationHeader, fmt.Sprint("forged-", forgeries.Add(1)))
		r.Header.Set(stream.LeaseHeader, "1")
		_ = fc.PublishMsg(r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := fc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The holder's processor is held until a forged answer went out, so
	// that b examines (and refuses) one before the holder's arrives.
	a.mu.Lock()
	b := startGroup(t, s.ClientURL(), "b")
	embedtest.Wait(t, "a forged answer", func() bool { return forgeries.Load() > 0 })
	embedtest.Wait(t, "the forged answer refused", func() bool { return b.g.Alarms()[AlarmState] > 0 })
	a.mu.Unlock()
	embedtest.Wait(t, "b synced", b.r.Synced)
	if b.state(t) != a.state(t) {
		t.Fatal("b restored a state other than the holder's")
	}
	if n := b.g.Alarms()[AlarmState]; n == 0 || forgeries.Load() == 0 {
		t.Fatalf("%d forged answers, %d alarms; want every one refused and alarmed", forgeries.Load(), n)
	}
}

// TestGroupFullOutage: while no server is reachable the holder keeps the
// decisions it computes (frames it had received); once a server is back
// they go out first, in order, each once, then the new ones, whether the
// outage outlasted the lease's holding or not.
func TestGroupFullOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("an outage longer than the lease TTL takes seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	for _, c := range []struct {
		name   string
		outage time.Duration
	}{
		{"shorter than the holding", 300 * time.Millisecond},
		{"longer than the lease TTL", testTTL + 500*time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own server and group, and mostly waits
			dir := t.TempDir()
			srv := embedtest.JetStreamServer(t, embednats.Options{StoreDir: dir})
			port := srv.Addr().(*net.TCPAddr).Port
			a := startGroup(t, srv.ClientURL(), "a")
			embedtest.Wait(t, "a holds the lease", a.g.Lease().Held)
			// The device reconnects at once, before the holder (2 s).
			dc, err := nats.Connect(srv.ClientURL(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(dc.Close)
			var mu sync.Mutex
			var got []stream.Pos
			if _, err := dc.Subscribe(stream.SpikesSubject("dev0"), func(m *nats.Msg) {
				p, err := stream.ParsePos(m.Header.Get(stream.PosHeader))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, stream.Pos{Epoch: p.Epoch, Bin: p.Bin})
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
			if err := dc.Flush(); err != nil {
				t.Fatal(err)
			}
			all := func() bool {
				mu.Lock()
				defer mu.Unlock()
				a.mu.Lock()
				defer a.mu.Unlock()
				return len(got) >= len(a.produced)
			}
			for lo := int64(0); lo < 1500; lo += 100 {
				a.feed(t, lo, 100, 0.5)
			}
			embedtest.Wait(t, "the decisions before the outage", all)
			srv.Shutdown()
			srv.WaitForShutdown()
			embedtest.Wait(t, "the holder cut off", func() bool { return !a.nc.IsConnected() })
			before := a.r.Gate().Stats().Held
			for lo := int64(1500); lo < 1700; lo += 100 {
				a.feed(t, lo, 100, 0.5)
			}
			if kept := a.r.Gate().Stats().Held - before; kept == 0 {
				t.Fatal("no decision kept during the outage")
			}
			time.Sleep(c.outage)
			srv = embedtest.JetStreamServer(t, embednats.Options{Port: port, StoreDir: dir})
			embedtest.Wait(t, "the device reconnected", dc.IsConnected)
			if err := dc.Flush(); err != nil {
				t.Fatal(err)
			}
			embedtest.Wait(t, "the kept decisions, with no new frame", all)
			for lo := int64(1700); lo < 1800; lo += 100 {
				a.feed(t, lo, 100, 0.5)
			}
			embedtest.Wait(t, "every decision", all)
			time.Sleep(100 * time.Millisecond) // a repeat would arrive by now
			mu.Lock()
			defer mu.Unlock()
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(got) != len(a.produced) {
				t.Fatalf("%d decisions messages received, %d produced", len(got), len(a.produced))
			}
			for i := range got {
				if got[i] != a.produced[i] {
					t.Fatalf("message %d at %v, want %v (in order, each once)", i, got[i], a.produced[i])
				}
			}
		})
	}
}
