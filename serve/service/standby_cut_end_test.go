package service

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// heldPred blocks the first model call with a window ending at or after
// from until release is closed, telling entered when it starts waiting.
type heldPred struct {
	p       rgc.Predictor
	from    int
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *heldPred) Predict(b *rgc.Batch, out []float32) error {
	if slices.ContainsFunc(b.Ends, func(e int) bool { return e >= h.from }) && h.held.CompareAndSwap(false, true) {
		close(h.entered)
		<-h.release
	}
	return h.p.Predict(b, out)
}

// startLeafPair starts a hub NATS server with JetStream and a leaf node
// server whose link to the hub runs through a cutProxy: cutting the
// proxy partitions the leaf's clients from the hub's while every client
// stays connected to its own server. The leaf dials the hub again every
// 20 ms.
func startLeafPair(t *testing.T) (hub, leaf *server.Server, link *cutProxy) {
	t.Helper()
	start := func(o *server.Options) *server.Server {
		o.Host, o.Port, o.NoLog, o.NoSigs, o.MaxPayload = "127.0.0.1", -1, true, true, 4<<20
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("server %s not ready", o.ServerName)
		}
		return s
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // the hub's leaf node port
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	link = startCutProxy(t, fmt.Sprint("127.0.0.1:", port))
	// The hub advertises the proxy: a leaf dials the leaf node addresses
	// its hub advertises too, which would bypass the cut.
	hub = start(&server.Options{ServerName: "hub", JetStream: true, StoreDir: t.TempDir(),
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: port, Advertise: strings.TrimPrefix(link.url(), "nats://")}})
	u, err := url.Parse(strings.Replace(link.url(), "nats://", "nats-leaf://", 1))
	if err != nil {
		t.Fatal(err)
	}
	leaf = start(&server.Options{ServerName: "leaf", LeafNode: server.LeafNodeOpts{
		ReconnectInterval: 20 * time.Millisecond, Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{u}}}}})
	checkFor(t, 10*time.Second, func() error { return awaited("the leaf linked", linked(hub, leaf)) })
	return hub, leaf, link
}

// leafMsgs returns the messages s sent (0) and received (1) on its leaf
// node link.
func leafMsgs(t *testing.T, s *server.Server) [2]int64 {
	t.Helper()
	lz, err := s.Leafz(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lz.Leafs) != 1 {
		t.Fatalf("%s: %d leaf node links, want 1", s.Name(), len(lz.Leafs))
	}
	return [2]int64{lz.Leafs[0].OutMsgs, lz.Leafs[0].InMsgs}
}

// linked reports whether the leaf's link to the hub is up on both sides.
func linked(hub, leaf *server.Server) bool {
	return hub.NumLeafNodes() == 1 && leaf.NumLeafNodes() == 1
}

// TestStandbyCutOverStreamEnd: the holder of a standby group and the
// device are on two NATS servers (a hub and a leaf node); a partition
// between the servers begins while the holder computes the decisions of
// a frames message and lasts over the stream's end. The holder publishes
// those decisions into the cut (its own server echoes them back, so it
// believes they went out), the device's last frames never reach it, and
// no later live frame shows it a gap: the device's connection never
// broke, so it asks for nothing. After the heal, the holder's tail
// request brings the missed frames back, and that answer counts as a gap
// (Replica.Recovered): the holder publishes again what it sent just
// before, as copies. The device takes every decision exactly once, in
// each cell's window order, equal to those a subscriber on the holder's
// side of the cut received, and the spikes are the offline rollout's.
func TestStandbyCutOverStreamEnd(t *testing.T) {
	f := getFixtureStagger(t, true)
	hub, leaf, link := startLeafPair(t)
	// The frames message cutAt..lost-1 is a horizon long, so that it ends
	// a window of every cell; its decisions go into the cut. The last
	// frames, lost..f.hi-1, are lost in it.
	const chunk = 10
	lost := f.hi - 4*chunk
	cutAt := lost - rgc.Horizon
	held := &heldPred{p: fakepred.New(f.ids), from: cutAt, entered: make(chan struct{}), release: make(chan struct{})}
	cfg := Config{Load: func(string, int) (*Model, error) { return &Model{Predictor: held, Cells: f.ids, Name: "fake"}, nil },
		MaxBatch: 3, PublishSilence: true, Stagger: true, ResendWait: time.Second}
	a := startReplica(t, hub.ClientURL(), cfg, "a")
	release := sync.OnceFunc(func() { close(held.release) })
	t.Cleanup(release) // before the replica stops: its processor may wait in the model call
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	d := a.s.devices[0]

	// The device on the leaf, serving resend requests from its ring; a
	// subscriber on the hub, never cut off, receives what the holder
	// published.
	dev := reconnectingDevice(t, leaf.ClientURL())
	run := receive(t, dev)
	base := receive(t, newPublisher(t, &env{url: hub.ClientURL()}, "dev0"))
	checkFor(t, 10*time.Second, func() error {
		return awaited("the device's interest at the hub", hub.GlobalAccount().Interest(stream.ResendSubject("dev0")) > 0 &&
			hub.GlobalAccount().Interest(stream.SpikesSubject("dev0")) >= 2)
	})

	if err := dev.SendHistory(f.histories()); err != nil {
		t.Fatal(err)
	}
	send := func(lo, hi, chunk int) {
		t.Helper()
		for ; lo < hi; lo += chunk {
			if err := dev.PublishFrames(f.frames(lo, min(lo+chunk, hi))); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(f.lo, cutAt, chunk)
	send(cutAt, lost, lost-cutAt)
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("frames %d..%d not computed", cutAt, lost-1)
	}
	// Every message published before the cut reached the leaf: the
	// holder has the echo of each, and the leaf took in as many as the
	// hub sent it.
	checkFor(t, 10*time.Second, func() error {
		gs := d.sb.Gate().Stats()
		out, in := leafMsgs(t, hub), leafMsgs(t, leaf)
		return awaited(fmt.Sprintf("the decisions before the cut at the leaf (published %d, echoed %d; link out %d, in %d)", gs.Published, gs.Echoed, out[0], in[1]),
			gs.Echoed == gs.Published && out[0] == in[1])
	})
	link.setCut(true)
	checkFor(t, 10*time.Second, func() error {
		return awaited("the link cut on both sides", hub.NumLeafNodes() == 0 && leaf.NumLeafNodes() == 0)
	})
	release()
	// The decisions of frames cutAt..lost-1, a window of every cell, reach
	// the hub's side only.
	decided := func(r *authRun) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		cells := map[int32]bool{}
		for k := range r.got {
			if k.end >= int64(cutAt) && k.end < int64(lost) {
				cells[k.cell] = true
			}
		}
		return len(cells)
	}
	checkFor(t, 10*time.Second, func() error {
		return awaited(fmt.Sprintf("a decision of every cell for frames %d..%d published (%d cells)", cutAt, lost-1, decided(base)),
			decided(base) == len(f.ids))
	})
	send(lost, f.hi, chunk) // the stream's end, lost in the cut
	if err := dev.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d.last.Load() != int64(lost-1) || decided(run) != 0 {
		t.Fatalf("before the heal: the holder's last frame %d (want %d), the device has decisions of %d cells for frames %d..%d (want 0)",
			d.last.Load(), lost-1, decided(run), cutAt, lost-1)
	}
	link.setCut(false)
	checkFor(t, 10*time.Second, func() error { return awaited("the link back", linked(hub, leaf)) })
	checkFor(t, waitLimit, func() error {
		return awaited(fmt.Sprintf("frame %d processed (last %d)", f.hi-1, d.last.Load()), d.last.Load() == int64(f.hi-1))
	})

	// The device's side trails the hub's by the link: wait up to 10 s for
	// it to hold every decision the hub's side holds (what it still lacks
	// then is reported below), then for no decision for 200 ms on either
	// side (a copy taken twice would come by then).
	covered := func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		base.mu.Lock()
		defer base.mu.Unlock()
		for k := range base.got {
			if _, ok := run.got[k]; !ok {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(10 * time.Second); !covered() && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	size := func(r *authRun) int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) + r.twice }
	since, n := time.Now(), -1
	checkFor(t, waitLimit, func() error {
		if m := size(run) + size(base); m != n {
			since, n = time.Now(), m
		}
		return awaited("no decision for 200 ms", time.Since(since) > 200*time.Millisecond)
	})
	run.mu.Lock()
	defer run.mu.Unlock()
	base.mu.Lock()
	defer base.mu.Unlock()
	var missing []windowKey
	for k, want := range base.got {
		if g, ok := run.got[k]; !ok {
			missing = append(missing, k)
		} else if g != want {
			t.Errorf("cell %d, window ending %d: the device's decision %+v, the hub side's %+v", k.cell, k.end, g, want)
		}
	}
	slices.SortFunc(missing, func(x, y windowKey) int { return int(x.end - y.end) })
	if len(missing) > 0 || len(run.got) != len(base.got) {
		t.Fatalf("the device lacks %d of the %d decisions published (%v), has %d; holder: %d copies after gaps, %v tail requests, %v bins recovered, gate %+v",
			len(missing), len(base.got), missing, len(run.got), d.sb.GapCopies(), counter(t, a.s.Registry(), "predictord_resend_requests_total", "dev0", "tail"),
			counter(t, a.s.Registry(), "predictord_resend_recovered_bins_total", "dev0"), d.sb.Gate().Stats())
	}
	if run.twice != 0 || run.late != 0 || run.invalid != 0 || base.twice != 0 {
		t.Errorf("the device took %d decisions twice, %d after a later window of their cell, %d invalid; the hub's side %d twice",
			run.twice, run.late, run.invalid, base.twice)
	}
	sameSpikes(t, spikesBefore(decisionsOf(run.got), f.hi), f.want)
	if d.sb.GapCopies() == 0 {
		t.Errorf("holder: no copies after gaps counted; the device's fence %+v", dev.FenceStats())
	}
}
