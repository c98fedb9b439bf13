package nemesis

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer echoes every line on a loopback port.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(l))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through c and waits at most wait for its echo.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) (time.Duration, error) {
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := r.ReadString('\n')
	return time.Since(start), err
}

func TestProxy(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, 2*time.Second); err != nil {
		t.Fatalf("forwarding: %v", err)
	}
	p.Slow(150 * time.Millisecond)
	if d, err := roundTrip(c, r, 2*time.Second); err != nil || d < 300*time.Millisecond {
		t.Fatalf("slow link: round trip %v (want at least 2 x 150 ms), %v", d, err)
	}
	p.Cut()
	if _, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
		t.Fatal("a cut link forwarded")
	}
	p.Heal()
	// The connection lost data while cut: healing closes it, and a new
	// one goes through.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a connection that lost data stayed open after the heal")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2), 2*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}
