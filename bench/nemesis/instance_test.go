package nemesis

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"rgcpred/serve/service"
)

// fakeEnv set to 1 makes the test binary a fake predictord
// (fakePredictord).
const fakeEnv = "NEMESIS_FAKE_PREDICTORD"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		fakePredictord(os.Args[1:])
	}
	os.Exit(m.Run())
}

// fakePredictord stands for predictord's /metrics: it listens on the
// address after --metrics-addr, logs it as predictord does and answers
// that it holds the lease until killed. A taken address ends it, as it
// ends predictord.
func fakePredictord(args []string) {
	var addr string
	if i := slices.Index(args, "--metrics-addr"); i >= 0 && i+1 < len(args) {
		addr = args[i+1]
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "predictord: --metrics-addr: %v\n", err)
		os.Exit(1)
	}
	log := zerolog.New(os.Stdout)
	log.Info().Str("addr", ln.Addr().String()).Msg(service.ServingHTTPMsg)
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "predictord_standby_holder 1")
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// TestInstanceRestartMetricsPort: the port of an instance's first start is
// taken by another listener (answering that it does not hold the lease)
// while the instance is down; its restart listens on another port, and
// the runner reads the instance there.
func TestInstanceRestartMetricsPort(t *testing.T) {
	t.Setenv(fakeEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "i0.log")
	in := &Instance{ID: "i0"}
	if err := in.start(exe, logPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Kill)
	first := waitHolder(t, in, logPath)
	in.Kill()

	ln, err := net.Listen("tcp", first)
	if err != nil {
		t.Fatalf("holding the first start's port: %v", err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "predictord_standby_holder 0")
	})}
	go func() { _ = other.Serve(ln) }() // ends with Close
	t.Cleanup(func() { _ = other.Close() })
	if in.Holder() {
		t.Fatal("the holder read on the other listener")
	}

	if err := in.Restart(); err != nil {
		t.Fatal(err)
	}
	if second := waitHolder(t, in, logPath); second == first {
		t.Fatalf("the restart reads %s, the taken port", second)
	}
}

// waitHolder waits until in answers on /metrics that it holds the lease
// and returns the address it read it at; in ending fails the test.
func waitHolder(t *testing.T, in *Instance, logPath string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !in.Holder() {
		if !in.Alive() || time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s not the holder on its /metrics (alive %v); its log:\n%s", in.ID, in.Alive(), b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	addr, _ := in.MetricsAddr()
	return addr
}
