package standby

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/embednats"
	"rgcpred/stream"
)

// dyingProxy forwards TCP connections to a server; while swallowing it
// drops what clients send (written into a connection about to die), and
// kill closes every connection, as a killed node does.
type dyingProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	swallow  bool
	dropped  []byte
	accepted []net.Conn
}

func startDyingProxy(t *testing.T, target string) *dyingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dyingProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.kill() })
	go p.serve()
	return p
}

func (p *dyingProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.accepted = append(p.accepted, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				p.mu.Lock()
				sw := p.swallow
				if sw {
					p.dropped = append(p.dropped, buf[:n]...)
				}
				p.mu.Unlock()
				if !sw && n > 0 {
					if _, werr := s.Write(buf[:n]); werr != nil {
						err = werr
					}
				}
				if err != nil {
					_ = s.Close()
					return
				}
			}
		}()
	}
}

// droppedHas reports whether the swallowed bytes contain b.
func (p *dyingProxy) droppedHas(b string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Contains(p.dropped, []byte(b))
}

func (p *dyingProxy) setSwallow(on bool) {
	p.mu.Lock()
	p.swallow = on
	p.mu.Unlock()
}

// kill closes every connection and stops swallowing.
func (p *dyingProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.accepted {
		_ = c.Close()
	}
	p.accepted, p.swallow = nil, false
}

// TestEchoOverNATS: over a real server and client, a holder whose
// connection dies with two decisions written into it (swallowed by a
// proxy, then closed) reconnects and publishes them again before the
// next one, with their original lease revision; the device, connected
// to the server directly, gets each position once and in order. Without
// the echo ring the two are lost.
func TestEchoOverNATS(t *testing.T) {
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	for _, c := range []struct {
		name string
		echo bool
		want []int64
	}{
		{"echo ring", true, []int64{1, 2, 3, 4, 5, 6}},
		{"without it", false, []int64{1, 2, 3, 6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			subject := "rgc.echo" + map[bool]string{true: "on", false: "off"}[c.echo] + ".spikes"
			scope := Scope("g", 0, 1)
			dev, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			var mu sync.Mutex
			var got []int64
			revs := map[int64]string{}
			if _, err := dev.Subscribe(subject, func(m *nats.Msg) {
				p, err := stream.ParsePos(m.Header.Get(stream.PosHeader))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, p.Bin)
				revs[p.Bin] = m.Header.Get(stream.LeaseHeader)
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
			if err := dev.Flush(); err != nil {
				t.Fatal(err)
			}
			received := func(n int) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= n }
			}

			proxy := startDyingProxy(t, srv.Addr().String())
			nc, err := nats.Connect("nats://"+proxy.ln.Addr().String(), nats.MaxReconnects(-1),
				nats.ReconnectWait(10*time.Millisecond), nats.ReconnectJitter(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			rev := uint64(7)
			send := natsSender(nc, scope, nil)
			g, err := NewGate(func(s string, p stream.Pos, d []byte) error { return send(s, p, rev, d) }, func() bool { return true }, 64)
			if err != nil {
				t.Fatal(err)
			}
			if c.echo {
				if err := g.SetEcho(Echo{Keep: 64, KeepBytes: 1 << 20, Revision: func() uint64 { return rev }, Publish: send,
					Generation: func() uint64 { return nc.Stats().Reconnects }}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ObserveNATS(nc, g, scope, nil, subject); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := g.Gain(); err != nil {
				t.Fatal(err)
			}
			publish := func(bin int64) {
				t.Helper()
				if err := g.Publish(subject, stream.Pos{Epoch: 1, Bin: bin}, []byte{byte(bin)}); err != nil && !errors.Is(err, ErrNotConnected) {
					t.Fatal(err)
				}
			}
			for b := range int64(3) {
				publish(b + 1)
			}
			waitFor(t, "the first three decisions", received(3))
			proxy.setSwallow(true)
			publish(4)
			publish(5)
			waitFor(t, "4 and 5 written into the dying connection", func() bool { return proxy.droppedHas("1.5.0") })
			proxy.kill()
			waitFor(t, "the reconnect", func() bool { return nc.IsConnected() && nc.Stats().Reconnects == 1 })
			rev = 8
			publish(6)
			waitFor(t, "decision 6", func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(got, 6) })
			if c.echo {
				waitFor(t, "every echo", func() bool { return g.Stats().Echoed == 6 })
			}
			if err := dev.Flush(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(got, c.want) {
				t.Fatalf("device got %v, want %v", got, c.want)
			}
			if c.echo && (revs[4] != "7" || revs[5] != "7" || revs[6] != "8") {
				t.Fatalf("lease revisions %v: want 4 and 5 at their original 7, 6 at 8", revs)
			}
		})
	}
}
