package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/natsauth"
	"rgcpred/serve/service"
	"rgcpred/stream"
)

// daemon is a run(...) in the background.
type daemon struct {
	logs   *syncBuf
	sigs   chan os.Signal
	cancel context.CancelFunc
	done   chan error
}

// startDaemon runs the command with args (plus --metrics-addr "" and JSON
// logs) and the fake model of cells 1 and 2 unless loader is given.
func startDaemon(t *testing.T, args []string, loader service.Loader) *daemon {
	t.Helper()
	if loader == nil {
		loader = fakeLoader([]int{1, 2})
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{logs: &syncBuf{}, sigs: make(chan os.Signal, 4), cancel: cancel, done: make(chan error, 1)}
	args = append([]string{"--metrics-addr", "", "--log-format", "json", "--model", "fake"}, args...)
	go func() { d.done <- run(ctx, args, d.logs, d.sigs, loader) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
		}
	})
	return d
}

// wait returns run's result, failing after timeout.
func (d *daemon) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		return err
	case <-time.After(timeout):
		t.Fatalf("run still running after %v\n%s", timeout, d.logs)
		return nil
	}
}

// waitLog waits until the logs hold a line with message msg and returns
// it decoded.
func (d *daemon) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sc := bufio.NewScanner(strings.NewReader(d.logs.String()))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if s, _ := m["message"].(string); strings.HasPrefix(s, msg) {
				return m
			}
		}
		select {
		case err := <-d.done:
			t.Fatalf("run ended (%v) before logging %q\n%s", err, msg, d.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q after 10 s\n%s", msg, d.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitServing waits until the daemon answers a status request of dev0
// over nc.
func waitServing(t *testing.T, d *daemon, nc *nats.Conn) *stream.Publisher {
	t.Helper()
	p, err := stream.NewPublisher(nc, "dev0")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := p.Status(ctx)
		cancel()
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not serving: %v\n%s", err, d.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEmbeddedPortTaken: a taken --embedded-addr port is a start-up error
// naming the address, not a silent move to another port.
func TestEmbeddedPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	d := startDaemon(t, []string{"--embedded-addr", addr}, nil)
	err = d.wait(t, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("run: %v, want an error naming %s in use", err, addr)
	}
}

// TestStartupErrors: bad, missing or doubly given secrets and bad
// operational flags are start-up errors that say what is wrong.
func TestStartupErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pass, empty := write("pass", "pw\n"), write("empty", "\n")
	c := newCreds(t)
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	accSeed, _ := c.account.Seed()
	good := c.userFile(t, nil, nil)
	expired := c.userFile(t, func(uc *jwt.UserClaims) { uc.Expires = time.Now().Add(-time.Hour).Unix() }, nil)
	mismatched := c.userFile(t, nil, otherSeed)
	accountSeed := c.userFile(t, nil, accSeed)
	garbage := write("garbage.creds", "-----BEGIN NATS USER JWT-----\nnot.a.jwt\n------END NATS USER JWT------\n")
	goodBytes, _ := os.ReadFile(good)
	noSeed := write("noseed.creds", strings.SplitAfter(string(goodBytes), "------END NATS USER JWT------\n")[0])
	url := []string{"--nats-url", "nats://127.0.0.1:1"} // never reached: the error comes first
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"password flag and file", []string{"--nats-user", "u", "--nats-pass", "x", "--nats-pass-file", pass}, nil, "given by both --nats-pass and --nats-pass-file"},
		{"token flag and env", []string{"--nats-token", "x"}, map[string]string{natsauth.EnvToken: "y"}, "given by both --nats-token and $NATS_TOKEN"},
		{"user flag and env", []string{"--nats-user", "u", "--nats-pass", "p"}, map[string]string{natsauth.EnvUser: "v"}, "given by both --nats-user and $NATS_USER"},
		{"missing token file", []string{"--nats-token-file", filepath.Join(dir, "none")}, nil, "--nats-token-file: open"},
		{"empty token file", []string{"--nats-token-file", empty}, nil, "empty file"},
		{"user without password", nil, map[string]string{natsauth.EnvUser: "u"}, "go together"},
		{"password without user", []string{"--nats-pass-file", pass}, nil, "go together"},
		{"missing creds", append([]string{"--nats-creds", filepath.Join(dir, "none.creds")}, url...), nil, "no such file"},
		{"missing creds env", url, map[string]string{natsauth.EnvCreds: filepath.Join(dir, "none.creds")}, "$NATS_CREDS"},
		{"creds flag and env", append([]string{"--nats-creds", good}, url...), map[string]string{natsauth.EnvCreds: good}, "given by both --nats-creds and $NATS_CREDS"},
		{"malformed creds", append([]string{"--nats-creds", garbage}, url...), nil, "no valid user JWT"},
		{"creds without seed", append([]string{"--nats-creds", noSeed}, url...), nil, "no user nkey seed"},
		{"creds with an account seed", append([]string{"--nats-creds", accountSeed}, url...), nil, "no user nkey seed"},
		{"creds of another user", append([]string{"--nats-creds", mismatched}, url...), nil, "is not the JWT's user"},
		{"expired creds", append([]string{"--nats-creds", expired}, url...), nil, "expired"},
		{"creds with the embedded server", []string{"--nats-creds", good}, nil, "needs --nats-url"},
		{"TLS with the embedded server", []string{"--nats-tls-ca", pass}, nil, "need --nats-url"},
		{"user and token with the embedded server", []string{"--nats-user", "u", "--nats-pass", "p", "--nats-token", "t"}, nil, "not both"},
		{"negative stale-after", []string{"--stale-after", "-1s"}, nil, "--stale-after"},
		{"negative drain timeout", []string{"--drain-timeout", "-1s"}, nil, "--drain-timeout"},
		{"zero ping interval", []string{"--nats-ping-interval", "0"}, nil, "--nats-ping-interval"},
		{"no pings outstanding", []string{"--nats-max-pings", "0"}, nil, "--nats-max-pings"},
		{"negative lease replicas", []string{"--standby-replicas", "-1"}, nil, "--standby-replicas"},
		{"more lease replicas than JetStream allows", []string{"--standby-replicas", "6"}, nil, "--standby-replicas"},
		{"embedded port out of range", []string{"--embedded-addr", "127.0.0.1:70000"}, nil, "bad port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			d := startDaemon(t, c.args, nil)
			err := d.wait(t, 5*time.Second)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestDrainEnds: a drain held up by a model call that does not return ends
// after --drain-timeout with an error, or at once on a second SIGINT or
// SIGTERM; either way the logs say what happened (and were flushed).
func TestDrainEnds(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		first   os.Signal // nil: cancel the context
		second  os.Signal // nil: none
		want    error
		wantLog string
		within  time.Duration
	}{
		{"drain timeout", []string{"--drain-timeout", "300ms"}, nil, nil, service.ErrDrainTimeout, "drain timeout: abandoning", 5 * time.Second},
		{"second SIGINT", []string{"--drain-timeout", "0"}, syscall.SIGINT, syscall.SIGINT, service.ErrAborted, "second signal while draining", 2 * time.Second},
		{"SIGTERM after cancel", []string{"--drain-timeout", "1m"}, nil, syscall.SIGTERM, service.ErrAborted, "second signal while draining", 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := startServer(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
			ids := []int{1, 2}
			g := fakepred.NewGate(fakepred.New(ids))
			defer close(g.Release)
			load := func(string, int) (*service.Model, error) {
				return &service.Model{Predictor: g, Cells: ids, Name: "gate"}, nil
			}
			d := startDaemon(t, append([]string{"--nats-url", srv.ClientURL(), "--max-lag", "0"}, c.args...), load)
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			p := waitServing(t, d, nc)
			g.Armed.Store(true)
			for _, f := range []*stream.Frames{{FirstSeq: 0, Frames: make([]stream.Frame, rgc.WindowBins)}, {FirstSeq: rgc.WindowBins, Frames: make([]stream.Frame, 10)}} {
				if err := p.PublishFrames(f); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-g.Entered:
			case <-time.After(10 * time.Second):
				t.Fatalf("model never called\n%s", d.logs)
			}
			if c.first == nil {
				d.cancel()
			} else {
				d.sigs <- c.first
			}
			d.waitLog(t, "draining")
			start := time.Now()
			if c.second != nil {
				d.sigs <- c.second
			}
			err = d.wait(t, 10*time.Second)
			if !errors.Is(err, c.want) {
				t.Fatalf("run: %v, want %v\n%s", err, c.want, d.logs)
			}
			if took := time.Since(start); took > c.within {
				t.Errorf("run returned %v after the drain began, want within %v", took, c.within)
			}
			if !strings.Contains(d.logs.String(), c.wantLog) {
				t.Errorf("logs lack %q\n%s", c.wantLog, d.logs)
			}
		})
	}
}
