package service

import (
	"crypto/rand"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// cutProxy forwards TCP connections to a server until cut: then it
// closes them and refuses new ones until healed, as a failed server the
// client reconnects away from.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialing
			p.mu.Unlock()
			_, _ = c.Close(), s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
	}
}

// setCut closes every forwarded connection and refuses new ones (true),
// or forwards again (false).
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
	}
}

// TestStandbySpikesResend: a standby group of two serves a device whose
// decision subscription's connection is cut for a while (it runs through
// a proxy) while its frames still reach the group. Once reconnected, the
// subscription asks the holder for what it missed: it ends with every
// decision exactly once (its fence took the copies, none twice) and in
// each cell's window order, equal to those of a subscription never cut; the standby is not confused by
// the holder's copies; with message keys too, where forged requests are
// refused and counted.
func TestStandbySpikesResend(t *testing.T) {
	if testing.Short() {
		t.Skip("hot-standby tests wait for a lease TTL")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	f := getFixtureStagger(t, true)
	want := 0
	for _, w := range f.want {
		want += len(w)
	}
	for _, keyed := range []bool{false, true} {
		name := "plain"
		if keyed {
			name = "keys"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each case has its own server and group, and mostly waits
			e := startJetStream(t)
			cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}
			var ks msgauth.Keys
			if keyed {
				ks = newKeys(t, "dev0")
				groupKey := make([]byte, msgauth.KeyLen)
				_, _ = rand.Read(groupKey)
				cfg.Keys, cfg.StandbyKeys = ks, map[string][]byte{"g": groupKey}
			}
			useKeys := func(p *stream.Publisher) *stream.Publisher {
				if keyed {
					if err := p.UseKeys(ks["dev0"]); err != nil {
						t.Fatal(err)
					}
				}
				return p
			}
			a := startReplica(t, e.url, cfg, "a")
			checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
			b := startReplica(t, e.url, cfg, "b")
			checkFor(t, waitLimit, func() error { return awaited("b synced", b.s.devices[0].sb.Synced()) })

			tx := useKeys(newPublisher(t, e, "dev0"))
			base := receive(t, tx)
			proxy := startCutProxy(t, strings.TrimPrefix(e.url, "nats://"))
			rc, err := nats.Connect(proxy.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rc.Close)
			rx, err := stream.NewPublisher(rc, "dev0")
			if err != nil {
				t.Fatal(err)
			}
			run := receive(t, useKeys(rx))

			const chunk = 8
			n := (f.hi - f.lo + chunk - 1) / chunk
			if err := tx.SendHistory(f.histories()); err != nil {
				t.Fatal(err)
			}
			for i, lo := 0, f.lo; lo < f.hi; i, lo = i+1, lo+chunk {
				switch i {
				case n / 3:
					proxy.setCut(true)
				case 2 * n / 3:
					// Every frame sent so far decided while rx was away.
					waitProcessed(t, tx, int64(lo-1))
					proxy.setCut(false)
				}
				if err := tx.PublishFrames(f.frames(lo, min(lo+chunk, f.hi))); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			base.wait(t, int64(f.hi), want)
			run.wait(t, int64(f.hi), want)

			if keyed {
				// Forged requests: without an authenticator, and under
				// another key; a's answers are counted.
				forger, err := nats.Connect(e.url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(forger.Close)
				other, _ := stream.NewAuth(newKeys(t, "dev0")["dev0"].Up)
				for _, sign := range []*stream.Auth{nil, other} {
					m := &nats.Msg{Subject: stream.SpikesResendSubject("dev0"), Header: nats.Header{
						stream.GroupHeader: {standby.Scope("g", 0, 1)}, stream.PosHeader: {"0.0.0"},
						stream.TimeHeader: {"9223372036854775807"}}}
					if sign != nil {
						sign.Sign(m)
					}
					r, err := forger.RequestMsg(m, 5*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					if r.Header.Get(stream.ResendRefusedHeader) == "" {
						t.Errorf("forged request answered: %v", r.Header)
					}
				}
			}

			run.mu.Lock()
			defer run.mu.Unlock()
			base.mu.Lock()
			defer base.mu.Unlock()
			if run.twice != 0 || base.twice != 0 || run.late != 0 || base.late != 0 {
				t.Errorf("decisions received twice: %d by the cut subscription, %d by the other; after a later window of their cell: %d, %d",
					run.twice, base.twice, run.late, base.late)
			}
			if len(run.got) != len(base.got) {
				t.Errorf("%d decisions by the cut subscription, %d by the other", len(run.got), len(base.got))
			}
			for k, d := range base.got {
				if g, ok := run.got[k]; !ok || g != d {
					t.Fatalf("cell %d, window ending %d: the cut subscription's decision %+v (received %v), the other's %+v", k.cell, k.end, g, ok, d)
				}
			}
			sameSpikes(t, spikesBefore(decisionsOf(run.got), f.hi), f.want)

			fs, rs := rx.FenceStats(), rx.SpikesResent()
			as, bs := a.s.devices[0].sb.ResendStats(), b.s.devices[0].sb.ResendStats()
			t.Logf("cut subscription: fence %+v, requests %+v; holder a: %+v; standby b: %+v", fs, rs, as, bs)
			// The copies fill the gap (checked above); the fence takes those
			// behind its mark through the window (FenceStats.Resent), the
			// others as new.
			if rs.Answered == 0 || rs.Announced == 0 || rs.Gaps != 0 || as.Resent != rs.Announced || fs.Resent > as.Resent {
				t.Errorf("cut subscription: %d answered requests announcing %d copies (%d with a gap), %d taken behind its mark; the holder resent %d",
					rs.Answered, rs.Announced, rs.Gaps, fs.Resent, as.Resent)
			}
			if bs.Answered != 0 || bs.Resent != 0 {
				t.Errorf("standby b answered %d requests", bs.Answered)
			}
			if gs := b.s.devices[0].sb.Gate().Stats(); gs.Ahead != 0 || gs.Discarded != 0 || !b.s.devices[0].sb.Synced() {
				t.Errorf("standby b after the holder's copies: gate %+v, synced %v", gs, b.s.devices[0].sb.Synced())
			}
			wantRefused := map[string]uint64{}
			if keyed {
				wantRefused = map[string]uint64{stream.ReasonAuthMissing: 1, stream.ReasonAuthInvalid: 1}
			}
			for _, k := range standby.ResendRefusals {
				if as.Refused[k] != wantRefused[k] {
					t.Errorf("holder refused %d requests for %s, want %d", as.Refused[k], k, wantRefused[k])
				}
			}
			if v := gathered(t, a.s, "predictord_standby_resend_requests_total"); v != float64(as.Answered+as.Gaps+uint64(len(wantRefused))) {
				t.Errorf("resend requests exported: %v, want %d", v, as.Answered+as.Gaps+uint64(len(wantRefused)))
			}
		})
	}
}
