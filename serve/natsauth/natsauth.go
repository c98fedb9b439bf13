// Package natsauth resolves predictord's NATS credentials from its flags,
// the files they name and the environment, each credential from exactly one
// place, checks a credentials file at start-up, and turns the credentials
// and TLS settings into NATS client options. Error messages name
// predictord's flags and environment variables (docs/operations.md).
package natsauth

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Environment variables read for the NATS credentials.
const (
	EnvUser     = "NATS_USER"
	EnvPassword = "NATS_PASSWORD"
	EnvToken    = "NATS_TOKEN"
	EnvCreds    = "NATS_CREDS"
	EnvNKey     = "NATS_NKEY"
)

// Flags are the credential flags as given (empty: not given).
type Flags struct {
	// User and Pass are --nats-user and --nats-pass; PassFile is
	// --nats-pass-file.
	User, Pass, PassFile string
	// Token is --nats-token, TokenFile --nats-token-file.
	Token, TokenFile string
	// Creds is --nats-creds, the path of a user JWT + nkey seed file.
	Creds string
	// NKey is --nats-nkey, the path of a user nkey seed file (a role of
	// deploy/nats/predictord.conf).
	NKey string
}

// Auth are the resolved NATS credentials.
type Auth struct {
	User, Pass, Token string
	// Creds is the path of the credentials file.
	Creds string
	// NKey is the path of the user nkey seed file.
	NKey string
}

// Mode names the authentication in logs (never the secrets): creds, nkey,
// user, token or none.
func (a Auth) Mode() string {
	switch {
	case a.Creds != "":
		return "creds"
	case a.NKey != "":
		return "nkey"
	case a.User != "":
		return "user"
	case a.Token != "":
		return "token"
	}
	return "none"
}

// source is one place a setting may come from: a flag, a file named by a
// flag, or an environment variable.
type source struct {
	name  string // how the user wrote it: "--nats-pass", "$NATS_PASSWORD"
	value string // the value, or the file's path when file is set
	file  bool
}

// oneOf returns the setting what from the one source that gives it (""
// if none does). Two sources are an error rather than one silently
// overriding the other. A file's content is read with its trailing line
// break removed and must not be empty.
func oneOf(what string, srcs ...source) (string, error) {
	var got *source
	for i := range srcs {
		if srcs[i].value == "" {
			continue
		}
		if got != nil {
			return "", fmt.Errorf("%s given by both %s and %s: give it once", what, got.name, srcs[i].name)
		}
		got = &srcs[i]
	}
	switch {
	case got == nil:
		return "", nil
	case !got.file:
		return got.value, nil
	}
	b, err := os.ReadFile(got.value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", got.name, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s %s: empty file", got.name, got.value)
	}
	return v, nil
}

// Resolve collects the credentials from the flags, the files they name and
// the environment (getenv), each from one place only, and checks a
// credentials file.
func Resolve(f Flags, getenv func(string) string) (Auth, error) {
	var a Auth
	var err error
	if a.User, err = oneOf("NATS user", source{name: "--nats-user", value: f.User}, source{name: "$" + EnvUser, value: getenv(EnvUser)}); err != nil {
		return a, err
	}
	if a.Pass, err = oneOf("NATS password", source{name: "--nats-pass", value: f.Pass},
		source{name: "--nats-pass-file", value: f.PassFile, file: true}, source{name: "$" + EnvPassword, value: getenv(EnvPassword)}); err != nil {
		return a, err
	}
	if a.Token, err = oneOf("NATS token", source{name: "--nats-token", value: f.Token},
		source{name: "--nats-token-file", value: f.TokenFile, file: true}, source{name: "$" + EnvToken, value: getenv(EnvToken)}); err != nil {
		return a, err
	}
	credsFrom := "--nats-creds"
	if f.Creds == "" {
		credsFrom = "$" + EnvCreds
	}
	if a.Creds, err = oneOf("NATS credentials file", source{name: "--nats-creds", value: f.Creds}, source{name: "$" + EnvCreds, value: getenv(EnvCreds)}); err != nil {
		return a, err
	}
	if a.NKey, err = oneOf("NATS nkey seed file", source{name: "--nats-nkey", value: f.NKey}, source{name: "$" + EnvNKey, value: getenv(EnvNKey)}); err != nil {
		return a, err
	}
	if a.NKey != "" {
		if err := CheckNKey(a.NKey); err != nil {
			return a, err
		}
	}
	if (a.User == "") != (a.Pass == "") {
		return a, errors.New("the NATS user (--nats-user, $" + EnvUser + ") and password (--nats-pass, --nats-pass-file, $" + EnvPassword + ") go together")
	}
	if a.Creds != "" {
		if err := CheckCreds(a.Creds); err != nil {
			return a, fmt.Errorf("%s: %w", credsFrom, err)
		}
	}
	return a, nil
}

// CheckCreds reads a NATS credentials file and checks that it holds a valid,
// unexpired user JWT and the user's nkey seed matching it, so that a bad file
// is a start-up error rather than a connection that keeps failing.
func CheckCreds(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	tok, err := nkeys.ParseDecoratedJWT(b)
	if err != nil {
		return fmt.Errorf("%s: no user JWT: %w", path, err)
	}
	claims, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return fmt.Errorf("%s: no valid user JWT: %w", path, err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return fmt.Errorf("%s: no user nkey seed: %w", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("%s: nkey seed: %w", path, err)
	}
	if pub != claims.Subject {
		return fmt.Errorf("%s: the nkey seed (%s) is not the JWT's user (%s)", path, pub, claims.Subject)
	}
	if claims.Expires != 0 && time.Unix(claims.Expires, 0).Before(time.Now()) {
		return fmt.Errorf("%s: the user JWT expired at %s", path, time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckNKey reads a user nkey seed file, so that a bad file is a start-up
// error rather than a connection that keeps failing.
func CheckNKey(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--nats-nkey: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return fmt.Errorf("--nats-nkey %s: no nkey seed: %w", path, err)
	}
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return fmt.Errorf("--nats-nkey %s: not a user nkey seed", path)
	}
	return nil
}

// TLS are the client TLS files (empty: not used).
type TLS struct {
	// CA verifies the server (--nats-tls-ca).
	CA string
	// Cert and Key are the client certificate and key (--nats-tls-cert,
	// --nats-tls-key), given together.
	Cert, Key string
}

// Options returns the connection name, auth and TLS options. With embedded
// (no --nats-url: predictord's own loopback server) only a user/password or
// a token is allowed: that server has no accounts and no TLS.
func Options(name string, embedded bool, a Auth, t TLS) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(name)}
	if embedded {
		switch {
		case a.Creds != "":
			return nil, errors.New("a NATS credentials file needs --nats-url: the embedded server has no accounts (use a user/password or token)")
		case t.CA != "" || t.Cert != "":
			return nil, errors.New("--nats-tls-* need --nats-url: the embedded server listens on loopback without TLS")
		case a.User != "" && a.Token != "":
			return nil, errors.New("the embedded server takes a NATS user/password or a token, not both")
		}
	}
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Pass))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if a.Creds != "" {
		opts = append(opts, nats.UserCredentials(a.Creds))
	}
	if a.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if t.CA != "" {
		opts = append(opts, nats.RootCAs(t.CA))
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if t.Cert != "" {
		opts = append(opts, nats.ClientCert(t.Cert, t.Key))
	}
	return opts, nil
}

// RedactURL returns a --nats-url value (URLs, comma-separated) fit for a
// log: the user information of each URL (a user and password, or a token
// in the user's place) is replaced by "redacted".
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		switch {
		case err != nil:
			parts[i] = "(unparsable URL)"
		case u.User != nil:
			u.User = url.User("redacted")
			parts[i] = u.String()
		default:
			parts[i] = p
		}
	}
	return strings.Join(parts, ",")
}

// RegisterFlags defines the credential and TLS flags on fs (--nats-user,
// --nats-pass, --nats-pass-file, --nats-token, --nats-token-file,
// --nats-creds, --nats-nkey, --nats-tls-ca, --nats-tls-cert, --nats-tls-key), filling f
// and t: every tool that connects to predictord's NATS takes the same
// ones.
func RegisterFlags(fs *flag.FlagSet, f *Flags, t *TLS) {
	fs.StringVar(&f.User, "nats-user", "",
		"NATS user name, with a password (or $"+EnvUser+"); the embedded server then requires them")
	fs.StringVar(&f.Pass, "nats-pass", "", "NATS password (visible in ps: prefer --nats-pass-file or $"+EnvPassword+")")
	fs.StringVar(&f.PassFile, "nats-pass-file", "", "file holding the NATS password (trailing newline ignored)")
	fs.StringVar(&f.Token, "nats-token", "",
		"NATS token, required by the embedded server too (or $"+EnvToken+"; prefer --nats-token-file)")
	fs.StringVar(&f.TokenFile, "nats-token-file", "", "file holding the NATS token (trailing newline ignored)")
	fs.StringVar(&f.Creds, "nats-creds", "",
		"NATS credentials file, user JWT + nkey seed (or $"+EnvCreds+"); needs --nats-url")
	fs.StringVar(&f.NKey, "nats-nkey", "",
		"NATS user nkey seed file, a role of the server's configuration (or $"+EnvNKey+"; deploy/nats/predictord.conf)")
	fs.StringVar(&t.CA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fs.StringVar(&t.Cert, "nats-tls-cert", "", "client certificate file for NATS TLS (with --nats-tls-key)")
	fs.StringVar(&t.Key, "nats-tls-key", "", "client key file for NATS TLS")
}
