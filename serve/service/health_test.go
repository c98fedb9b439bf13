package service

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"testing"

	"github.com/rs/zerolog"
)

// TestServingAddr: a listener on port 0 logs the port the kernel picked,
// ServingAddr reads it back from the JSON log, and /healthz answers there;
// other lines name no address.
func TestServingAddr(t *testing.T) {
	var buf bytes.Buffer
	s, err := New(Config{Devices: []string{"dev0"}, Load: fakeLoader([]int{1, 2}), Log: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := s.ListenHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var addrs []string
	for sc := bufio.NewScanner(bytes.NewReader(buf.Bytes())); sc.Scan(); {
		if a, ok := ServingAddr(sc.Bytes()); ok {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) != 1 {
		t.Fatalf("addresses logged %q, want 1 (log: %s)", addrs, buf.String())
	}
	if _, port, err := net.SplitHostPort(addrs[0]); err != nil || port == "0" {
		t.Fatalf("address logged %q: port 0 not resolved (%v)", addrs[0], err)
	}
	r, err := http.Get("http://" + addrs[0] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("/healthz at the logged address: %d", r.StatusCode)
	}

	for _, line := range []string{
		``,
		`predictord: --metrics-addr: listen 127.0.0.1:39589: bind: address already in use`,
		`{"level":"info","message":"serving /metrics, /healthz, /readyz"}`,
		`{"level":"info","addr":"127.0.0.1:1","message":"other"}`,
		`{"level":"info","addr":"127.0.0.1:1","message":"serving /metrics, /healthz, /readyz"`,
		`{"level":"info","addr":7,"message":"serving /metrics, /healthz, /readyz"}`,
	} {
		if a, ok := ServingAddr([]byte(line)); ok {
			t.Errorf("ServingAddr(%q) = %q, want none", line, a)
		}
	}
}
