package natsauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pass := write("pass", "s3cret\n")
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	userSeed := write("user.nk", string(seed)+"\n")
	akp, _ := nkeys.CreateAccount()
	aseed, _ := akp.Seed()
	accountSeed := write("account.nk", string(aseed))
	empty := write("empty", "\n")
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		name    string
		f       Flags
		getenv  func(string) string
		want    Auth
		mode    string
		wantErr string
	}{
		{"none", Flags{}, env(), Auth{}, "none", ""},
		{"user flags", Flags{User: "u", Pass: "p"}, env(), Auth{User: "u", Pass: "p"}, "user", ""},
		{"password file, user from env", Flags{PassFile: pass}, env(EnvUser, "u"), Auth{User: "u", Pass: "s3cret"}, "user", ""},
		{"token from env", Flags{}, env(EnvToken, "t"), Auth{Token: "t"}, "token", ""},
		{"password twice", Flags{User: "u", Pass: "p"}, env(EnvPassword, "q"), Auth{}, "", "given by both --nats-pass and $NATS_PASSWORD"},
		{"token flag and file", Flags{Token: "t", TokenFile: pass}, env(), Auth{}, "", "given by both --nats-token and --nats-token-file"},
		{"empty token file", Flags{TokenFile: empty}, env(), Auth{}, "", "empty file"},
		{"missing password file", Flags{User: "u", PassFile: filepath.Join(dir, "nope")}, env(), Auth{}, "", "--nats-pass-file"},
		{"user without password", Flags{User: "u"}, env(), Auth{}, "", "go together"},
		{"bad creds from env", Flags{}, env(EnvCreds, pass), Auth{}, "", "$NATS_CREDS"},
		{"nkey seed file", Flags{NKey: userSeed}, env(), Auth{NKey: userSeed}, "nkey", ""},
		{"nkey from env", Flags{}, env(EnvNKey, userSeed), Auth{NKey: userSeed}, "nkey", ""},
		{"nkey twice", Flags{NKey: userSeed}, env(EnvNKey, userSeed), Auth{}, "", "given by both --nats-nkey and $NATS_NKEY"},
		{"not a seed", Flags{NKey: pass}, env(), Auth{}, "", "no nkey seed"},
		{"an account seed", Flags{NKey: accountSeed}, env(), Auth{}, "", "not a user nkey seed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := Resolve(c.f, c.getenv)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || a != c.want || a.Mode() != c.mode {
				t.Fatalf("got %+v (mode %s), %v; want %+v (mode %s)", a, a.Mode(), err, c.want, c.mode)
			}
		})
	}
}

func TestOptionsEmbedded(t *testing.T) {
	for _, c := range []struct {
		name     string
		embedded bool
		a        Auth
		tls      TLS
		want     int // options returned, the connection name included
		wantErr  string
	}{
		{"plain", true, Auth{}, TLS{}, 1, ""},
		{"user", true, Auth{User: "u", Pass: "p"}, TLS{}, 2, ""},
		{"creds need a url", true, Auth{Creds: "x.creds"}, TLS{}, 0, "needs --nats-url"},
		{"tls needs a url", true, Auth{}, TLS{CA: "ca.pem"}, 0, "need --nats-url"},
		{"user and token", true, Auth{User: "u", Pass: "p", Token: "t"}, TLS{}, 0, "not both"},
		{"remote tls", false, Auth{Token: "t"}, TLS{CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}, 4, ""},
		{"cert without key", false, Auth{}, TLS{Cert: "c.pem"}, 0, "go together"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts, err := Options("predictord", c.embedded, c.a, c.tls)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || len(opts) != c.want {
				t.Fatalf("%d options, %v; want %d", len(opts), err, c.want)
			}
		})
	}
}

// TestRedactURL: credentials in --nats-url never reach a log.
func TestRedactURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@host:4222", "nats://redacted@host:4222"},
		{"nats://t0ken@host:4222", "nats://redacted@host:4222"},
		{"nats://a:b@h1:4222, nats://h2:4222", "nats://redacted@h1:4222,nats://h2:4222"},
		{"nats://a:b@h1:4222/%zz", "(unparsable URL)"},
	}
	for _, c := range cases {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "t0ken", "alice"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q keeps %q", c.in, got, secret)
			}
		}
	}
}
