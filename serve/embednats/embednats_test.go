package embednats

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStartServesPubSub(t *testing.T) {
	s, err := Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "hi" {
		t.Fatalf("got %v, %v", m, err)
	}
}

// TestStartAuth: a server started with credentials refuses clients
// without them (or with wrong ones) and accepts the right ones.
func TestStartAuth(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		good  nats.Option
		wrong nats.Option
	}{
		{"user", Options{Username: "dev", Password: "pw"}, nats.UserInfo("dev", "pw"), nats.UserInfo("dev", "nope")},
		{"token", Options{Token: "s3cret"}, nats.Token("s3cret"), nats.Token("guess")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Host, o.Port = "127.0.0.1", -1
			s, err := StartOptions(o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown()
			for _, bad := range []nats.Option{func(*nats.Options) error { return nil }, c.wrong} {
				if nc, err := nats.Connect(s.ClientURL(), bad, nats.Timeout(5*time.Second)); err == nil {
					nc.Close()
					t.Fatal("client without the right credentials accepted")
				} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
					t.Errorf("refusal %v, want an authorization error", err)
				}
			}
			nc, err := nats.Connect(s.ClientURL(), c.good, nats.Timeout(5*time.Second))
			if err != nil {
				t.Fatalf("client with credentials refused: %v", err)
			}
			nc.Close()
		})
	}
}

// TestStartRefuses: a taken port is an error at once (no silent move to
// another port), and so are inconsistent options.
func TestStartRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"taken port", Options{Host: "127.0.0.1", Port: taken}, "address already in use"},
		{"port 0", Options{Host: "127.0.0.1", Port: 0}, "out of range"},
		{"user without password", Options{Host: "127.0.0.1", Port: -1, Username: "u"}, "go together"},
		{"user and token", Options{Host: "127.0.0.1", Port: -1, Username: "u", Password: "p", Token: "t"}, "exclude"},
		{"every interface without auth", Options{Host: "0.0.0.0", Port: -1}, "without authentication"},
		{"empty host without auth", Options{Host: "", Port: -1}, "without authentication"},
		{"LAN address without auth", Options{Host: "192.168.1.10", Port: -1}, "without authentication"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			s, err := StartOptions(c.opts)
			if err == nil {
				s.Shutdown()
				t.Fatalf("started on %s", s.ClientURL())
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
			if c.opts.Port > 0 && !strings.Contains(err.Error(), strconv.Itoa(taken)) {
				t.Errorf("error %q does not name the port", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v", d)
			}
		})
	}
}

// TestStartJetStream: JetStream is off by default and, when enabled with a
// store directory, serves a key-value bucket whose entries survive a
// restart on the same directory; JetStream without a directory is refused.
func TestStartJetStream(t *testing.T) {
	if _, err := StartOptions(Options{Host: "127.0.0.1", Port: -1, JetStream: true}); err == nil {
		t.Fatal("JetStream without a store directory accepted")
	}
	if _, err := StartOptions(Options{Host: "127.0.0.1", Port: -1, StoreDir: t.TempDir()}); err == nil {
		t.Fatal("a store directory without JetStream accepted")
	}
	plain, err := Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	enabled := plain.JetStreamEnabled()
	plain.Shutdown()
	if enabled {
		t.Fatal("JetStream enabled by default")
	}

	dir := t.TempDir()
	put := func(s *server.Server, value string) string {
		t.Helper()
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
		if err != nil {
			t.Fatal(err)
		}
		var old string
		if e, err := kv.Get(ctx, "k"); err == nil {
			old = string(e.Value())
		}
		if _, err := kv.PutString(ctx, "k", value); err != nil {
			t.Fatal(err)
		}
		return old
	}
	for i, want := range []string{"", "one"} {
		s, err := StartOptions(Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		got := put(s, []string{"one", "two"}[i])
		s.Shutdown()
		s.WaitForShutdown()
		if got != want {
			t.Fatalf("start %d: stored value %q, want %q", i, got, want)
		}
	}
}

func TestParseAddr(t *testing.T) {
	for _, c := range []struct {
		addr string
		host string
		port int
		ok   bool
	}{
		{"127.0.0.1:4222", "127.0.0.1", 4222, true},
		{"127.0.0.1:0", "127.0.0.1", -1, true},
		{":4223", "", 4223, true},
		{"[::1]:5000", "::1", 5000, true},
		{"127.0.0.1", "", 0, false},
		{"127.0.0.1:x", "", 0, false},
		{"127.0.0.1:65536", "", 0, false},
		{"127.0.0.1:-1", "", 0, false},
	} {
		host, port, err := ParseAddr(c.addr)
		if (err == nil) != c.ok || (c.ok && (host != c.host || port != c.port)) {
			t.Errorf("ParseAddr(%q) = %q, %d, %v; want %q, %d, ok %v", c.addr, host, port, err, c.host, c.port, c.ok)
		}
	}
}

// TestStartNonLoopbackWithAuth: a server on every interface starts when it
// requires authentication; loopback hosts need none.
func TestStartNonLoopbackWithAuth(t *testing.T) {
	for _, o := range []Options{
		{Host: "0.0.0.0", Port: -1, Token: "t"},
		{Host: "0.0.0.0", Port: -1, Username: "u", Password: "p"},
		{Host: "::1", Port: -1},
		{Host: "localhost", Port: -1},
	} {
		s, err := StartOptions(o)
		if err != nil {
			if strings.Contains(err.Error(), "cannot assign") { // no IPv6 loopback here
				continue
			}
			t.Fatalf("%+v: %v", o, err)
		}
		s.Shutdown()
	}
}
