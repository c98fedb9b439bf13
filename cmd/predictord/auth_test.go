package main

import (
	"context"
	"os"
	"path/filepath"
	"rgcpred/serve/natsauth"
	"rgcpred/stream"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

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
		{"token env", nil, map[string]string{natsauth.EnvToken: "envtok"}, nats.Token("envtok"), nats.Token("s3cret")},
		{"token file", []string{"--nats-token-file", tokenFile}, nil, nats.Token("t0ken"), nats.Token("t0ken\n")},
		{"user env, password file", []string{"--nats-pass-file", passFile}, map[string]string{natsauth.EnvUser: "dev"}, nats.UserInfo("dev", "pw"), nats.UserInfo("dev", "pw\n")},
		{"user and password env", nil, map[string]string{natsauth.EnvUser: "dev", natsauth.EnvPassword: "envpw"}, nats.UserInfo("dev", "envpw"), nats.UserInfo("other", "envpw")},
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
				t.Setenv(natsauth.EnvCreds, cs.env)
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

// TestNATSAuth: the daemon connects with a token and with user/password to
// servers that require them.
func TestNATSAuth(t *testing.T) {
	cases := []struct {
		name string
		opts func(o *server.Options)
		args []string
		conn nats.Option
	}{
		{"token", func(o *server.Options) { o.Authorization = "s3cret" }, []string{"--nats-token", "s3cret"}, nats.Token("s3cret")},
		{"user", func(o *server.Options) { o.Username, o.Password = "dev", "pw" }, []string{"--nats-user", "dev", "--nats-pass", "pw"}, nats.UserInfo("dev", "pw")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
			c.opts(opts)
			srv := startServer(t, opts)
			if _, err := nats.Connect(srv.ClientURL()); err == nil {
				t.Fatal("server accepts unauthenticated clients: test is void")
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			logs := &syncBuf{}
			args := append([]string{"--nats-url", srv.ClientURL(), "--metrics-addr", "", "--model", "fake"}, c.args...)
			go func() { done <- run(ctx, args, logs, nil, fakeLoader([]int{1, 2})) }()
			nc, err := nats.Connect(srv.ClientURL(), c.conn)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			p, _ := stream.NewPublisher(nc, "dev0")
			deadline := time.Now().Add(10 * time.Second)
			for {
				st, err := p.Status(context.Background())
				if err == nil {
					if len(st.Cells) != 2 {
						t.Fatalf("status %+v", st)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("daemon not serving: %v\n%s", err, logs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
