package nemesis

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy is a fault-injecting TCP proxy on loopback between one process and
// one NATS server: it forwards both ways, and on command cuts the link
// (data is swallowed, connections stay open, as behind a failed switch;
// new connections are accepted and swallowed too) or slows it (every
// chunk is held for a latency before it is forwarded, in order).
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	latency time.Duration
	conns   map[*link]bool
	closed  bool
	wg      sync.WaitGroup
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	// dirty: data was swallowed while cut; the connection's byte stream is
	// broken and is closed when the link heals.
	dirty bool
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("nemesis: proxy to %s: %w", target, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*link]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns the proxy's address as a NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Cut makes the link swallow everything until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Slow holds every chunk for latency before forwarding it (0: none).
func (p *Proxy) Slow(latency time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = latency
}

// Heal ends a cut and a slow link; connections that lost data while cut
// are closed (their byte streams are broken), so the client reconnects.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.latency = false, 0
	for l := range p.conns {
		if l.dirty {
			l.client.Close()
			l.server.Close()
		}
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for l := range p.conns {
		l.client.Close()
		l.server.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the server is down: as a refused connection
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[l] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, c, s)
		go p.pipe(l, s, c)
	}
}

// chunk is data read from one side, due on the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe forwards from src to dst through a queue that applies the link's
// latency; a cut swallows what is read.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				src.Close() // ends the reader; the rest of the queue is dropped
				for range q {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut, lat := p.cut, p.latency
			if cut {
				l.dirty = true
			}
			p.mu.Unlock()
			if !cut {
				q <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(lat)}
			}
		}
		if err != nil { // EOF, a reset or a close ends the link alike
			break
		}
	}
	close(q)
	<-done
	src.Close()
	dst.Close()
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}
