package standby

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
)

// heldBack starts instance id as a peer that may not take the lease until
// allow is set: the lease entry stays absent while it lives, as after its
// holding lapsed.
func heldBack(t *testing.T, url, id string, allow *atomic.Bool, config func(*GroupConfig)) *groupDev {
	t.Helper()
	return startGroupWith(t, url, id, config, func(g *Group) {
		g.lease.cfg.Eligible = func() bool { return allow.Load() && g.synced() }
	})
}

// withKey gives an instance the group's key key (32 bytes of b).
func withKey(t *testing.T, b byte) func(*GroupConfig) {
	return func(c *GroupConfig) {
		a, err := NewKeyAuth(c.Group, bytes.Repeat([]byte{b}, 32))
		if err != nil {
			t.Fatal(err)
		}
		c.Auth = a
	}
}

// TestGroupStartPeers: an instance that starts while the lease entry is
// absent catches up first if an instance with the group's state answers
// (signed with the group's key when there is one), and starts from a
// fresh state, after PeerWait, if none does: nobody else, a peer that is
// itself catching up, or a party without the key.
func TestGroupStartPeers(t *testing.T) {
	for _, c := range []struct {
		name string
		// peer starts what runs beside the starting instance (nil: nothing).
		peer      func(t *testing.T, url string, allow *atomic.Bool) *groupDev
		config    func(t *testing.T) func(*GroupConfig)
		late      bool
		forgeries uint64 // peers answers refused for their signature, at least
	}{
		{"the group's first start", nil, nil, false, 0},
		{"a synced peer whose holding lapsed", func(t *testing.T, url string, allow *atomic.Bool) *groupDev {
			return heldBack(t, url, "p", allow, nil)
		}, nil, true, 0},
		{"a peer catching up", func(t *testing.T, url string, allow *atomic.Bool) *groupDev {
			p := heldBack(t, url, "p", allow, nil)
			p.r.synced.Store(false)
			return p
		}, nil, false, 0},
		{"a synced peer with the group's key", func(t *testing.T, url string, allow *atomic.Bool) *groupDev {
			return heldBack(t, url, "p", allow, withKey(t, 1))
		}, func(t *testing.T) func(*GroupConfig) { return withKey(t, 1) }, true, 0},
		{"a synced party without the group's key", func(t *testing.T, url string, allow *atomic.Bool) *groupDev {
			return heldBack(t, url, "p", allow, withKey(t, 2))
		}, func(t *testing.T) func(*GroupConfig) { return withKey(t, 1) }, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := embedtest.JetStreamServer(t, embednats.Options{})
			var allow atomic.Bool
			if c.peer != nil {
				p := c.peer(t, s.ClientURL(), &allow)
				if p.g.Lease().Held() {
					t.Fatal("the held-back peer holds the lease")
				}
			}
			var config func(*GroupConfig)
			if c.config != nil {
				config = c.config(t)
			}
			start := time.Now()
			b := startGroupWith(t, s.ClientURL(), "b", config, nil)
			took := time.Since(start)
			if b.g.Late() != c.late {
				t.Fatalf("late %v, want %v", b.g.Late(), c.late)
			}
			if n := b.g.Alarms()[AlarmState]; n < c.forgeries || (c.forgeries == 0 && n != 0) {
				t.Fatalf("%d state alarms, want %d or more", n, c.forgeries)
			}
			if c.late {
				return // TestGroupLapsedHolderPeer goes on from here
			}
			if took < testPeerWait {
				t.Fatalf("started fresh after %v, before PeerWait %v", took, testPeerWait)
			}
			embedtest.Wait(t, "b holds the lease", b.g.Lease().Held)
			if !b.r.Synced() || b.r.Restores() != 0 {
				t.Fatalf("b synced %v after %d restores, want a fresh state", b.r.Synced(), b.r.Restores())
			}
		})
	}
}

// TestGroupLapsedHolderPeer: an instance that starts while the lease
// entry is absent and a synced peer is alive (its holding lapsed) never
// takes the lease with its fresh state: it waits for the peer to take
// the lease again and restores its state; or, if the peer dies first
// with the state, it goes on from its own state PeerWait later.
func TestGroupLapsedHolderPeer(t *testing.T) {
	for _, peerDies := range []bool{false, true} {
		name := map[bool]string{false: "the peer takes the lease", true: "the peer dies"}[peerDies]
		t.Run(name, func(t *testing.T) {
			s := embedtest.JetStreamServer(t, embednats.Options{})
			var allow atomic.Bool
			p := heldBack(t, s.ClientURL(), "p", &allow, nil)
			for lo := int64(0); lo < 4200; lo += 100 {
				p.feed(t, lo, 100, 0.5)
			}
			b := startGroup(t, s.ClientURL(), "b")
			if !b.g.Late() || b.r.Synced() {
				t.Fatalf("b late %v, synced %v with a synced peer alive: want to catch up first", b.g.Late(), b.r.Synced())
			}
			// The lease stays free for many PeerWaits: b waits for p.
			time.Sleep(5 * testPeerWait)
			if b.r.Synced() || b.g.Lease().Held() {
				t.Fatalf("b synced %v, holding %v while the lease was free and p alive", b.r.Synced(), b.g.Lease().Held())
			}
			if peerDies {
				p.g.Stop()
				embedtest.Wait(t, "b holds the lease", b.g.Lease().Held)
				if b.r.Restores() != 0 {
					t.Fatalf("%d restores from a dead peer", b.r.Restores())
				}
				return
			}
			allow.Store(true)
			embedtest.Wait(t, "p holds the lease", p.g.Lease().Held)
			embedtest.Wait(t, "b caught up from p", func() bool { return b.r.Synced() && b.r.Restores() == 1 })
			for lo := int64(4200); lo < 4400; lo += 100 {
				p.feed(t, lo, 100, 0.5)
				b.feed(t, lo, 100, 0.5)
			}
			if p.state(t) != b.state(t) {
				t.Fatal("b's state differs from p's after catching up")
			}
			if b.g.Lease().Held() {
				t.Fatal("b holds the lease beside p")
			}
		})
	}
}

// TestGroupStartTogether: two instances started at once, neither with a
// state, end with exactly one holding the lease and both synced.
func TestGroupStartTogether(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	var wg sync.WaitGroup
	ds := make([]*groupDev, 2)
	for i, id := range []string{"a", "b"} {
		wg.Add(1)
		go func() { defer wg.Done(); ds[i] = startGroup(t, s.ClientURL(), id) }()
	}
	wg.Wait()
	if ds[0] == nil || ds[1] == nil {
		t.Fatal("an instance did not start")
	}
	embedtest.Wait(t, "one holds the lease, both synced", func() bool {
		return ds[0].g.Lease().Held() != ds[1].g.Lease().Held() && ds[0].r.Synced() && ds[1].r.Synced()
	})
}

// TestPeerAnswer: a peers answer counts only from an instance with a
// synced device, and with a key only signed for the request's inbox.
func TestPeerAnswer(t *testing.T) {
	k1, err := NewKeyAuth("g", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := NewKeyAuth("g", bytes.Repeat([]byte{2}, 32))
	if err != nil {
		t.Fatal(err)
	}
	good := peerAnswer{ID: "p", Incarnation: "i", Synced: 1}
	cases := []struct {
		name       string
		a          peerAnswer
		sign       Authenticator
		inbox      string // the inbox it arrives on
		check      Authenticator
		wantRefuse bool
	}{
		{"unsigned, no key", good, nil, "_INBOX.1", nil, false},
		{"signed, right key", good, k1, "_INBOX.1", k1, false},
		{"unsigned, key", good, nil, "_INBOX.1", k1, true},
		{"signed, other key", good, k2, "_INBOX.1", k1, true},
		{"replayed to another request", good, k1, "_INBOX.2", k1, true},
		{"no synced device", peerAnswer{ID: "p", Incarnation: "i"}, nil, "_INBOX.1", nil, true},
		{"no incarnation", peerAnswer{ID: "p", Synced: 1}, nil, "_INBOX.1", nil, true},
	}
	for _, c := range cases {
		b, err := encodePeerAnswer(c.a, "_INBOX.1", c.sign)
		if err != nil {
			t.Fatal(err)
		}
		_, err = readPeerAnswer(&nats.Msg{Subject: c.inbox, Data: b}, c.check)
		if (err != nil) != c.wantRefuse {
			t.Errorf("%s: error %v, want refused %v", c.name, err, c.wantRefuse)
		}
	}
}
