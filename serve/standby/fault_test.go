package standby

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
)

// The fault tests run replicas as child processes (this test binary with
// replicaEnv set), so that kill -9 and SIGSTOP act on real processes. A
// replica turns every frame seq received on inSubject into one message on
// outSubject through a Lease and a Gate: the deterministic computation of
// the daemon reduced to its position, which is what the gate orders.
const (
	replicaEnv = "STANDBY_TEST_REPLICA"
	urlEnv     = "STANDBY_TEST_URL"
	inSubject  = "dev.in"
	outSubject = "dev.out"
	faultTTL   = 2 * time.Second
)

func TestMain(m *testing.M) {
	if id := os.Getenv(replicaEnv); id != "" {
		if err := runReplica(id, os.Getenv(urlEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "replica", id+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runReplica serves until SIGTERM, then releases the lease.
func runReplica(id, url string) error {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	kv, err := LeaseBucket(ctx, js, "leases", faultTTL)
	if err != nil {
		return err
	}
	var g *Gate
	l, err := NewLease(LeaseConfig{KV: kv, Key: "group", Holder: id, TTL: faultTTL,
		OnGain: func() {
			if err := g.Gain(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		},
		OnLoss: func() { g.Lose() }})
	if err != nil {
		return err
	}
	scope := Scope("group", 0, 1)
	if g, err = NewGate(NATSPublisher(nc, scope, l.Revision), l.Held, 1<<14); err != nil {
		return err
	}
	if _, err := ObserveNATS(nc, g, scope, nil, outSubject); err != nil {
		return err
	}
	if _, err := nc.Subscribe(inSubject, func(m *nats.Msg) {
		seq := int64(binary.LittleEndian.Uint64(m.Data))
		_ = g.Publish(outSubject, g.Next(1, seq), m.Data)
	}); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Println("ready")
	l.Run(ctx, nil)
	return nil
}

// replica is a running child process.
type replica struct {
	id  string
	cmd *exec.Cmd
}

func startReplica(t *testing.T, id, url string) *replica {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), replicaEnv+"="+id, urlEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("replica %s: %q, %v", id, line, err)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }()
	return r
}

// stopped reports whether every thread of process pid is stopped, by
// the state field of /proc/pid/task/*/stat; where /proc has no such
// entries (not Linux) it reports true, since there is nothing to wait on.
func stopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return true
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold any character.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestFailover streams frames through replicas, injects a fault while the
// stream runs, and checks that the device received the message of every
// frame exactly once. The worst lateness (receipt minus the frame's send
// time) is logged: about the TTL plus a retry for a lost holder.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("fault tests start processes and take seconds")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	cases := []struct {
		name  string
		fault func(t *testing.T, f *fixture)
	}{
		{"kill -9 holder", func(t *testing.T, f *fixture) {
			h := f.holderReplica(t)
			if err := h.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			f.waitHolderNot(t, h.id)
		}},
		{"stalled holder", func(t *testing.T, f *fixture) {
			// A message the holder's NATS client has taken but not yet
			// written to its socket when the process stops goes out when it
			// resumes, after the takeover: the limit the package documents
			// (delivery within Margin), which a device covers by dropping a
			// repeated Rgc-Pos. So the holder stops with nothing in flight;
			// frames go on while it is stopped.
			f.pause.Lock()
			waitFor(t, "the frames sent so far delivered", f.delivered)
			h := f.holderReplica(t)
			err := h.cmd.Process.Signal(syscall.SIGSTOP)
			if err == nil {
				// kill returns before every thread has stopped; a thread
				// still running could take the next frame.
				waitFor(t, "every thread of the holder stopped", func() bool { return stopped(h.cmd.Process.Pid) })
			}
			f.pause.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			f.waitHolderNot(t, h.id)
			time.Sleep(200 * time.Millisecond) // frames go on while both run
			if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}},
		{"late joiner takes over", func(t *testing.T, f *fixture) {
			f.replicas = append(f.replicas, startReplica(t, "c", f.url))
			time.Sleep(100 * time.Millisecond)
			for range 2 { // kill the holder twice: the late joiner ends up holding
				h := f.holderReplica(t)
				if h.id == "c" {
					break
				}
				if err := h.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				f.waitHolderNot(t, h.id)
			}
			if h := f.holderReplica(t); h.id != "c" {
				t.Fatalf("holder %s, want the late joiner c", h.id)
			}
		}},
		{"nats server restart", func(t *testing.T, f *fixture) {
			f.pause.Lock() // the device holds its frames while the server is down
			defer f.pause.Unlock()
			// Core NATS delivers at most once: a frame in flight when the
			// server stops is lost to every replica alike (the daemon fills
			// such a gap). What is tested is the lease and the gate across
			// the restart, so the frames sent so far are delivered first.
			waitFor(t, "the frames sent so far delivered", f.delivered)
			in, out := f.srv.GlobalAccount().Interest(inSubject), f.srv.GlobalAccount().Interest(outSubject)
			f.srv.Shutdown()
			f.srv.WaitForShutdown()
			s := embedtest.JetStreamServer(t, embednats.Options{Port: f.port, StoreDir: f.dir})
			f.srv = s
			// Every client reconnects and subscribes again before the device
			// goes on.
			waitFor(t, "every subscriber back", func() bool {
				return s.GlobalAccount().Interest(inSubject) >= in && s.GlobalAccount().Interest(outSubject) >= out
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own server and replicas, and mostly waits
			f := newFixture(t)
			f.run(t, 2000, 2*time.Millisecond, c.fault)
		})
	}
}

// fixture is a NATS server, replicas a and b, and a device.
type fixture struct {
	srv      *server.Server
	url      string
	port     int
	dir      string
	replicas []*replica
	kv       jetstream.KeyValue
	pause    sync.Mutex // held by a fault that stops the device sending
	// delivered reports whether the device received a message for every
	// frame it sent so far (set by run).
	delivered func() bool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	s := embedtest.JetStreamServer(t, embednats.Options{StoreDir: dir})
	f := &fixture{srv: s, url: s.ClientURL(), port: s.Addr().(*net.TCPAddr).Port, dir: dir}
	_, f.kv = bucket(t, s, faultTTL)
	f.replicas = []*replica{startReplica(t, "a", f.url), startReplica(t, "b", f.url)}
	f.waitHolderNot(t, "")
	return f
}

// currentHolder returns the holder named in the lease entry ("" none).
func (f *fixture) currentHolder() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e, err := f.kv.Get(ctx, "group")
	if err != nil {
		return ""
	}
	h, err := HolderOf(e.Value())
	if err != nil {
		return ""
	}
	return h
}

// waitHolderNot waits until a replica other than id holds the lease.
func (f *fixture) waitHolderNot(t *testing.T, id string) {
	t.Helper()
	waitFor(t, "a holder other than "+strconv.Quote(id), func() bool {
		h := f.currentHolder()
		return h != "" && h != id
	})
}

// holderReplica returns the replica holding the lease.
func (f *fixture) holderReplica(t *testing.T) *replica {
	t.Helper()
	h := f.currentHolder()
	for _, r := range f.replicas {
		if r.id == h {
			return r
		}
	}
	t.Fatalf("holder %q is none of the replicas", h)
	return nil
}

// run sends frames 0..n-1 every period, applies fault after a third of
// them, and checks that the device receives every frame's message exactly
// once.
func (f *fixture) run(t *testing.T, n int64, period time.Duration, fault func(*testing.T, *fixture)) {
	t.Helper()
	dev, err := nats.Connect(f.url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var mu sync.Mutex
	got := make([]int, n)
	sent := make([]time.Time, n)
	late := make([]time.Duration, n)
	received, nsent := 0, 0
	f.delivered = func() bool {
		mu.Lock()
		defer mu.Unlock()
		return received == nsent
	}
	if _, err := dev.Subscribe(outSubject, func(m *nats.Msg) {
		seq := int64(binary.LittleEndian.Uint64(m.Data))
		mu.Lock()
		defer mu.Unlock()
		if seq < 0 || seq >= n {
			t.Errorf("message for frame %d outside 0..%d", seq, n-1)
			return
		}
		if got[seq] == 0 {
			received++
		}
		got[seq]++
		late[seq] = time.Since(sent[seq])
	}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Flush(); err != nil {
		t.Fatal(err)
	}
	faulted := make(chan struct{})
	tick := time.NewTicker(period)
	defer tick.Stop()
	buf := make([]byte, 8)
	for seq := range n {
		if seq == n/3 {
			go func() { defer close(faulted); fault(t, f) }()
			time.Sleep(10 * time.Millisecond) // let the fault take its locks
		}
		<-tick.C
		f.pause.Lock()
		mu.Lock()
		sent[seq] = time.Now()
		nsent++
		mu.Unlock()
		binary.LittleEndian.PutUint64(buf, uint64(seq))
		err := dev.Publish(inSubject, buf)
		f.pause.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	<-faulted
	waitFor(t, "every frame's message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return received == int(n)
	})
	time.Sleep(faultTTL) // a duplicate would arrive by now
	mu.Lock()
	defer mu.Unlock()
	var worst time.Duration
	for seq, c := range got {
		if c != 1 {
			t.Errorf("frame %d: %d messages, want 1", seq, c)
		}
		worst = max(worst, late[seq])
	}
	t.Logf("%d frames, each message once; worst lateness %v (TTL %v)", n, worst, faultTTL)
}
