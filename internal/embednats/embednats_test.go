package embednats

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
