package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/serve/embednats"
)

// TestConnectAuth: replay takes predictord's credential flags; a server
// requiring a token refuses replay without it, and an error never shows a
// password given in --nats-url.
func TestConnectAuth(t *testing.T) {
	srv, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	url := srv.ClientURL()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string // "" connects
	}{
		{"no token", []string{"--nats-url", url}, "uthorization"},
		{"--nats-token", []string{"--nats-url", url, "--nats-token", "s3cret"}, ""},
		{"--nats-token-file", []string{"--nats-url", url, "--nats-token-file", tokenFile}, ""},
		{"wrong password in the URL", []string{"--nats-url", strings.Replace(url, "nats://", "nats://u:hunter2@", 1)}, "redacted@"},
		{"two token sources", []string{"--nats-url", url, "--nats-token", "a", "--nats-token-file", tokenFile}, "token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"--data", "d"}, c.args...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			nc, err := connect(o, "replay test")
			if c.want == "" {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				nc.Close()
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q: want it to say %q and no password", err, c.want)
			}
		})
	}
}
