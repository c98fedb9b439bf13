package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rgcpred/internal/fakepred"
	"rgcpred/internal/service"
	"rgcpred/model"
	"rgcpred/rgc"
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

// TestEmbeddedAuth: with a token or a user/password (from flags, files or
// the environment) the embedded server requires them: a device without
// them is refused, one with them is served. Port 0 picks a free port,
// whose URL is logged.
func TestEmbeddedAuth(t *testing.T) {
	dir := t.TempDir()
	tokenFile, passFile := filepath.Join(dir, "token"), filepath.Join(dir, "pass")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(passFile, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		good  nats.Option
		wrong nats.Option
	}{
		{"token flag", []string{"--nats-token", "s3cret"}, nil, nats.Token("s3cret"), nats.Token("guess")},
		{"user flags", []string{"--nats-user", "dev", "--nats-pass", "pw"}, nil, nats.UserInfo("dev", "pw"), nats.UserInfo("dev", "no")},
		{"token env", nil, map[string]string{envToken: "envtok"}, nats.Token("envtok"), nats.Token("s3cret")},
		{"token file", []string{"--nats-token-file", tokenFile}, nil, nats.Token("t0ken"), nats.Token("t0ken\n")},
		{"user env, password file", []string{"--nats-pass-file", passFile}, map[string]string{envUser: "dev"}, nats.UserInfo("dev", "pw"), nats.UserInfo("dev", "pw\n")},
		{"user and password env", nil, map[string]string{envUser: "dev", envPassword: "envpw"}, nats.UserInfo("dev", "envpw"), nats.UserInfo("other", "envpw")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			d := startDaemon(t, append([]string{"--embedded-addr", "127.0.0.1:0"}, c.args...), nil)
			line := d.waitLog(t, "embedded NATS server started")
			url, _ := line["url"].(string)
			if url == "" || strings.HasSuffix(url, ":4222") {
				t.Fatalf("embedded server URL %q, want a free port", url)
			}
			for _, secret := range []string{"s3cret", "envtok", "t0ken", "envpw"} {
				if strings.Contains(d.logs.String(), secret) {
					t.Errorf("logs show the secret %q", secret)
				}
			}
			for _, bad := range []nats.Option{func(*nats.Options) error { return nil }, c.wrong} {
				if nc, err := nats.Connect(url, bad, nats.Timeout(5*time.Second)); err == nil {
					nc.Close()
					t.Fatal("embedded server accepts a device without the credentials")
				} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
					t.Errorf("refusal %v, want an authorization error", err)
				}
			}
			nc, err := nats.Connect(url, c.good, nats.Timeout(5*time.Second))
			if err != nil {
				t.Fatalf("device with the credentials refused: %v", err)
			}
			defer nc.Close()
			waitServing(t, d, nc)
			d.cancel()
			if err := d.wait(t, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		})
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

// creds are NATS operator-mode credentials for tests.
type creds struct {
	operator nkeys.KeyPair
	account  nkeys.KeyPair
	accPub   string
	accJWT   string
}

func newCreds(t *testing.T) *creds {
	t.Helper()
	op, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accPub, _ := acc.PublicKey()
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	return &creds{operator: op, account: acc, accPub: accPub, accJWT: accJWT}
}

// userFile writes a creds file of a new user of the account; edit may
// change the claims before signing, and seed, if not nil, replaces the
// user's seed in the file (making it invalid).
func (c *creds) userFile(t *testing.T, edit func(*jwt.UserClaims), seed []byte) string {
	t.Helper()
	u, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := u.PublicKey()
	uc := jwt.NewUserClaims(pub)
	if edit != nil {
		edit(uc)
	}
	tok, err := uc.Encode(c.account)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := u.Seed()
	b, err := jwt.FormatUserConfig(tok, own)
	if err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		b = []byte(strings.Replace(string(b), string(own), string(seed), 1))
	}
	path := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// server starts a NATS server in operator mode trusting c's operator and
// account.
func (c *creds) server(t *testing.T) *server.Server {
	t.Helper()
	opPub, _ := c.operator.PublicKey()
	res := &server.MemAccResolver{}
	if err := res.Store(c.accPub, c.accJWT); err != nil {
		t.Fatal(err)
	}
	return startServer(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TrustedKeys: []string{opPub}, AccountResolver: res, NoSystemAccount: true})
}

// TestNATSCreds: the daemon authenticates with a user JWT + nkey seed
// creds file (--nats-creds or $NATS_CREDS) to a server in operator mode.
func TestNATSCreds(t *testing.T) {
	c := newCreds(t)
	srv := c.server(t)
	path := c.userFile(t, nil, nil)
	if nc, err := nats.Connect(srv.ClientURL(), nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("server accepts clients without creds: test is void")
	}
	cases := []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--nats-creds", path}, ""},
		{"env", nil, path},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			if cs.env != "" {
				t.Setenv(envCreds, cs.env)
			}
			d := startDaemon(t, append([]string{"--nats-url", srv.ClientURL()}, cs.args...), nil)
			nc, err := nats.Connect(srv.ClientURL(), nats.UserCredentials(c.userFile(t, nil, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			waitServing(t, d, nc)
			d.cancel()
			if err := d.wait(t, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		})
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
		{"token flag and env", []string{"--nats-token", "x"}, map[string]string{envToken: "y"}, "given by both --nats-token and $NATS_TOKEN"},
		{"user flag and env", []string{"--nats-user", "u", "--nats-pass", "p"}, map[string]string{envUser: "v"}, "given by both --nats-user and $NATS_USER"},
		{"missing token file", []string{"--nats-token-file", filepath.Join(dir, "none")}, nil, "--nats-token-file: open"},
		{"empty token file", []string{"--nats-token-file", empty}, nil, "empty file"},
		{"user without password", nil, map[string]string{envUser: "u"}, "go together"},
		{"password without user", []string{"--nats-pass-file", pass}, nil, "go together"},
		{"missing creds", append([]string{"--nats-creds", filepath.Join(dir, "none.creds")}, url...), nil, "no such file"},
		{"missing creds env", url, map[string]string{envCreds: filepath.Join(dir, "none.creds")}, "$NATS_CREDS"},
		{"creds flag and env", append([]string{"--nats-creds", good}, url...), map[string]string{envCreds: good}, "given by both --nats-creds and $NATS_CREDS"},
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
		{"second SIGINT", []string{"--drain-timeout", "0"}, syscall.SIGINT, syscall.SIGINT, errAborted, "second signal while draining", 2 * time.Second},
		{"SIGTERM after cancel", []string{"--drain-timeout", "1m"}, nil, syscall.SIGTERM, errAborted, "second signal while draining", 2 * time.Second},
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

// blockedWriter blocks every Write until released, then records.
type blockedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	b       strings.Builder
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *blockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestLogNeverBlocks: with the log output blocked, logging returns at once
// (lines beyond the buffer are dropped and counted); once the output moves
// again, closing the sink writes out the last lines and the drop count.
func TestLogNeverBlocks(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			w := &blockedWriter{release: make(chan struct{})}
			dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
			log, sink, err := newLogger(&options{logLevel: "info", logFormat: format}, w, dropped)
			if err != nil {
				t.Fatal(err)
			}
			const lines = 3 * logBufferLines
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range lines {
					log.Info().Int("i", i).Msg("line")
				}
				log.Info().Msg("the last line")
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("logging blocked on a blocked output")
			}
			close(w.release)
			if err := sink.Close(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			out := w.String()
			if !strings.Contains(out, "the last line") {
				t.Error("the last line was not written out on close")
			}
			written := 0 // the lines "line", JSON or console (bold message)
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, `"message":"line"`) || strings.Contains(l, "\x1b[1mline\x1b[0m") {
					written++
				}
			}
			var m dto.Metric
			if err := dropped.Write(&m); err != nil {
				t.Fatal(err)
			}
			n := int(m.GetCounter().GetValue())
			if n == 0 || uint64(n) != sink.dropped.Load() || !strings.Contains(out, "lines dropped") {
				t.Fatalf("%d lines dropped (sink says %d), %d written; want the drops counted and reported", n, sink.dropped.Load(), written)
			}
			// The diode counts a lap of the buffer as dropped lines even when
			// part of it is written out later, so the count may exceed the
			// loss, never fall short of it.
			if written+n < lines {
				t.Errorf("%d lines written + %d dropped < %d logged: lines lost uncounted", written, n, lines)
			}
		})
	}
}

// writeCheckpoint writes a small random checkpoint of cells ids with the
// given bin rate to path.
func writeCheckpoint(t *testing.T, ids []int, rate float64, path string) {
	t.Helper()
	cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	ck := &model.Checkpoint{Weights: model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2))), CellIDs: ids, BinRateHz: rate,
		WindowBins: rgc.WindowBins, Horizon: rgc.Horizon, Provenance: model.Provenance{Data: "random", TrainedAt: "2026-01-01T00:00:00Z"}}
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointBinRate: a checkpoint trained at another bin rate than the
// stream's is refused at start, and on reload (the old model stays).
func TestCheckpointBinRate(t *testing.T) {
	ids := []int{3, 5}
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "1khz.ckpt"), filepath.Join(dir, "model.ckpt")
	writeCheckpoint(t, ids, 1000, bad)
	writeCheckpoint(t, ids, rgc.BinRateHz, good)
	srv := startServer(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})

	d := startDaemon(t, []string{"--nats-url", srv.ClientURL(), "--model", bad}, engineLoader(1))
	err := d.wait(t, 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "bin rate 1000.000000 Hz differs from the stream's 991.820436 Hz") {
		t.Fatalf("run with a 1 kHz checkpoint: %v", err)
	}

	d = startDaemon(t, []string{"--nats-url", srv.ClientURL(), "--model", good}, engineLoader(1))
	d.waitLog(t, "serving")
	b, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.sigs <- syscall.SIGHUP
	line := d.waitLog(t, "reload failed")
	if e, _ := line["error"].(string); !strings.Contains(e, "bin rate 1000.000000 Hz differs") {
		t.Fatalf("reload error %q", e)
	}
	d.cancel()
	if err := d.wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}
