package embednats_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"rgcpred/serve/embednats"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
)

// shippedConfig is the NATS configuration the project ships.
const shippedConfig = "../../deploy/nats/predictord.conf"

// role is a user of the shipped configuration: its nkey's environment
// variable and what it may publish and subscribe to among probeSubjects.
type role struct {
	name, env string
	pub, sub  []string
}

// roles states, independently of the configuration file, what each role
// may do; every other subject of probeSubjects must be refused.
var roles = []role{
	{"device", "RGC_DEVICE_DEV0_NKEY",
		[]string{"rgc.dev0.stim", "rgc.dev0.ctl", "rgc.dev0.status", "rgc.dev0.spikes.resend"},
		[]string{"rgc.dev0.spikes", "rgc.dev0.events", "rgc.dev0.resend", "_INBOX.probe"}},
	{"daemon", "RGC_DAEMON_NKEY",
		[]string{"rgc.dev0.spikes", "rgc.dev0.events", "rgc.dev0.ctl", "rgc.dev0.resend", "rgcpred.standby.main.dev0.state",
			"rgcpred.standby.main.dev0.digest", "rgcpred.standby.main.alarms", "rgcrec.dev0.session", "rgcrec.dev0.fill",
			"$KV.rgcpred_standby.probe", "$JS.API.STREAM.INFO.KV_rgcpred_standby", "$JS.API.STREAM.INFO.RGCREC",
			"$JS.API.CONSUMER.MSG.NEXT.RGCREC.probe"},
		[]string{"rgc.dev0.stim", "rgc.dev0.ctl", "rgc.dev0.status", "rgc.dev0.spikes", "rgc.dev0.events", "rgc.dev0.spikes.resend",
			"rgcpred.standby.main.dev0.state", "rgcpred.standby.main.dev0.digest", "predictord.reset", "predictord.reload", "predictord.status", "predictord.info", "$SRV.PING", "_INBOX.probe"}},
	{"operator", "RGC_OPERATOR_NKEY",
		[]string{"predictord.reset", "predictord.reload", "predictord.status", "predictord.info", "$SRV.PING"},
		[]string{"_INBOX.probe"}},
	{"observer", "RGC_OBSERVER_NKEY",
		[]string{"predictord.status", "predictord.info", "$SRV.PING", "rgc.dev0.status",
			"$JS.API.STREAM.INFO.RGCREC", "$JS.API.CONSUMER.MSG.NEXT.RGCREC.probe"},
		[]string{"rgcpred.standby.main.alarms", "_INBOX.probe"}},
}

// probeSubjects are the subjects every role tries: every subject of the
// system, those of another device, group and bucket, and wildcards.
var probeSubjects = []string{
	"rgc.dev0.stim", "rgc.dev0.ctl", "rgc.dev0.spikes", "rgc.dev0.events", "rgc.dev0.status", "rgc.dev0.resend",
	"rgc.dev0.spikes.resend", "rgc.dev1.stim", "rgc.dev1.ctl", "rgc.dev1.spikes", "rgc.dev1.events", "rgc.dev1.resend",
	"rgc.dev1.spikes.resend",
	"predictord.reset", "predictord.reload", "predictord.status", "predictord.info", "$SRV.PING",
	"rgcpred.standby.main.dev0.state", "rgcpred.standby.other.dev0.state",
	"rgcpred.standby.main.dev0.digest", "rgcpred.standby.other.dev0.digest", "rgcpred.standby.main.alarms", "rgcpred.standby.other.alarms", "rgcrec.dev0.session", "rgcrec.dev1.session", "rgcrec.dev0.fill", "rgcrec.dev1.fill",
	"$KV.rgcpred_standby.probe", "$KV.other.probe",
	"$JS.API.STREAM.INFO.KV_rgcpred_standby", "$JS.API.STREAM.DELETE.KV_rgcpred_standby", "$JS.API.STREAM.PURGE.KV_rgcpred_standby",
	"$JS.API.STREAM.INFO.RGCREC", "$JS.API.STREAM.DELETE.RGCREC", "$JS.API.STREAM.PURGE.RGCREC",
	"$JS.API.STREAM.CREATE.OTHER", "$JS.API.CONSUMER.MSG.NEXT.RGCREC.probe", "_INBOX.probe",
}

// wildcards are subscriptions every role must be refused.
var wildcards = []string{">", "rgc.>", "rgc.*.stim", "rgc.dev0.*", "$JS.>", "$KV.>", "predictord.*"}

// violations collects a connection's permission violations by subject.
type violations struct {
	mu      sync.Mutex
	pub     map[string]bool
	sub     map[string]bool
	changed chan struct{}
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	msg := err.Error()
	i := strings.Index(msg, `"`)
	j := strings.LastIndex(msg, `"`)
	if i < 0 || j <= i {
		return
	}
	subj := msg[i+1 : j]
	v.mu.Lock()
	if strings.Contains(msg, "Publish") {
		v.pub[subj] = true
	} else {
		v.sub[subj] = true
	}
	v.mu.Unlock()
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// deliveryWait bounds the wait for a message, an answer or a refusal
// (the error reaches the client's asynchronous handler): a failure, not a
// measurement, so long enough for a loaded host.
const deliveryWait = 10 * time.Second

// waitFor waits until the violations number n, then a little longer for
// any beyond.
func (v *violations) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(deliveryWait)
	for {
		v.mu.Lock()
		got := len(v.pub) + len(v.sub)
		v.mu.Unlock()
		if got >= n {
			time.Sleep(20 * time.Millisecond)
			return
		}
		select {
		case <-v.changed:
		case <-deadline:
			return
		}
	}
}

type conn struct {
	nc *nats.Conn
	v  *violations
}

// servers start a NATS server with the shipped configuration and
// JetStream and return its URL: the embedded one, and Debian's nats-server
// (2.9) where it is installed.
var servers = []struct {
	name  string
	start func(t *testing.T) string
}{
	{"embedded", func(t *testing.T) string {
		srv, err := embednats.StartOptions(embednats.Options{Host: "127.0.0.1", Port: -1, ConfigFile: shippedConfig,
			JetStream: true, StoreDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		return srv.ClientURL()
	}},
	{"nats-server", func(t *testing.T) string {
		bin, err := exec.LookPath("nats-server")
		if err != nil {
			t.Skip("nats-server not installed (apt-get install nats-server): the embedded server's run covers the roles")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
		cmd := exec.Command(bin, "-c", shippedConfig, "-a", "127.0.0.1", "-p", port, "-js", "-sd", t.TempDir())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		url := "nats://127.0.0.1:" + port
		for range 100 {
			if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
				_ = c.Close()
				return url
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("nats-server on %s not ready", port)
		return ""
	}},
}

// startShipped starts a server (servers) and connects every role with a
// fresh nkey.
func startShipped(t *testing.T, start func(t *testing.T) string) map[string]*conn {
	t.Helper()
	seeds := map[string]string{}
	for _, r := range roles {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		p := filepath.Join(t.TempDir(), r.name+".nk")
		if err := os.WriteFile(p, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv(r.env, pub)
		seeds[r.name] = p
	}
	url := start(t)
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	conns := map[string]*conn{}
	for _, r := range roles {
		v := &violations{pub: map[string]bool{}, sub: map[string]bool{}, changed: make(chan struct{}, 1)}
		o, err := nats.NkeyOptionFromSeed(seeds[r.name])
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(url, o, nats.ErrorHandler(v.handler))
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		t.Cleanup(nc.Close)
		conns[r.name] = &conn{nc: nc, v: v}
	}
	return conns
}

// TestShippedRolesRefuseEverythingElse: with deploy/nats/predictord.conf,
// the server refuses every publish and subscribe a role is not granted
// (probeSubjects and wildcards), and no other.
func TestShippedRolesRefuseEverythingElse(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) { refuseEverythingElse(t, startShipped(t, srv.start)) })
	}
}

func refuseEverythingElse(t *testing.T, conns map[string]*conn) {
	for _, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			c := conns[r.name]
			var wantPub, wantSub []string
			for _, s := range probeSubjects {
				if err := c.nc.Publish(s, []byte("probe")); err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(r.pub, s) {
					wantPub = append(wantPub, s)
				}
				if _, err := c.nc.SubscribeSync(s); err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(r.sub, s) {
					wantSub = append(wantSub, s)
				}
			}
			for _, s := range wildcards {
				if _, err := c.nc.SubscribeSync(s); err != nil {
					t.Fatal(err)
				}
				wantSub = append(wantSub, s)
			}
			if err := c.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			c.v.waitFor(t, len(wantPub)+len(wantSub))
			c.v.mu.Lock()
			defer c.v.mu.Unlock()
			for _, s := range probeSubjects {
				if got, want := c.v.pub[s], slices.Contains(wantPub, s); got != want {
					t.Errorf("publish %s: refused %v, want %v", s, got, want)
				}
				if got, want := c.v.sub[s], slices.Contains(wantSub, s); got != want {
					t.Errorf("subscribe %s: refused %v, want %v", s, got, want)
				}
			}
			for _, s := range wildcards {
				if !c.v.sub[s] {
					t.Errorf("subscribe %s: not refused", s)
				}
			}
		})
	}
}

// TestShippedRolesWork: what each role is granted works end to end: every
// allowed publish reaches a role allowed to receive it, the daemon answers
// requests, and the daemon's JetStream work (standby lease bucket, flight
// recorder) and the observer's audit read succeed, while the observer
// cannot delete the recording.
func TestShippedRolesWork(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) { rolesWork(t, startShipped(t, srv.start)) })
	}
}

func rolesWork(t *testing.T, conns map[string]*conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, r := range roles {
		for _, s := range r.pub {
			var to *role
			for i := range roles {
				if slices.Contains(roles[i].sub, s) {
					to = &roles[i]
				}
			}
			if to == nil {
				continue // a JetStream subject: checked below
			}
			sub, err := conns[to.name].nc.SubscribeSync(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := conns[to.name].nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := conns[r.name].nc.Publish(s, []byte(r.name)); err != nil {
				t.Fatal(err)
			}
			if m, err := sub.NextMsg(deliveryWait); err != nil || string(m.Data) != r.name {
				t.Errorf("%s publishing %s, %s receiving: %v", r.name, s, to.name, err)
			}
			_ = sub.Unsubscribe()
		}
	}
	// The daemon answers the device's and the operator's requests.
	daemon := conns["daemon"].nc
	requests := []struct{ who, subj string }{{"device", "rgc.dev0.status"}, {"device", "rgc.dev0.spikes.resend"}, {"operator", "predictord.reset"}}
	for _, r := range requests {
		subj := r.subj
		sub, err := daemon.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	_ = daemon.Flush()
	for _, r := range requests {
		if m, err := conns[r.who].nc.Request(r.subj, nil, deliveryWait); err != nil || string(m.Data) != "ok" {
			t.Errorf("%s requesting %s: %v", r.who, r.subj, err)
		}
	}
	// The device answers the daemon's resend requests (allow_responses).
	device := conns["device"].nc
	resend, err := device.Subscribe("rgc.dev0.resend", func(m *nats.Msg) { _ = m.Respond([]byte("frames")) })
	if err != nil {
		t.Fatal(err)
	}
	defer resend.Unsubscribe()
	_ = device.Flush()
	if m, err := daemon.Request("rgc.dev0.resend", nil, deliveryWait); err != nil || string(m.Data) != "frames" {
		t.Errorf("daemon requesting rgc.dev0.resend: %v", err)
	}
	// The daemon's JetStream work.
	js, err := jetstream.New(daemon)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := standby.LeaseBucket(ctx, js, "rgcpred_standby", time.Second)
	if err != nil {
		t.Fatalf("daemon: lease bucket: %v", err)
	}
	rev, err := kv.Create(ctx, "main.0.1", []byte("holder"))
	if err != nil {
		t.Fatalf("daemon: lease create: %v", err)
	}
	if _, err := kv.Update(ctx, "main.0.1", []byte("holder"), rev); err != nil {
		t.Fatalf("daemon: lease update: %v", err)
	}
	if e, err := kv.Get(ctx, "main.0.1"); err != nil || string(e.Value()) != "holder" {
		t.Fatalf("daemon: lease get: %v", err)
	}
	if _, err := recorder.Ensure(ctx, js, recorder.Config{Stream: "RGCREC", Devices: []string{"dev0"}, Memory: true}); err != nil {
		t.Fatalf("daemon: recorder stream: %v", err)
	}
	if err := recorder.WriteSession(ctx, js, "dev0", recorder.Session{Cells: []int{1}}); err != nil {
		t.Fatalf("daemon: session header: %v", err)
	}
	// The observer reads the recording and cannot delete it or the lease.
	ojs, err := jetstream.New(conns["observer"].nc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := recorder.StreamSource(ojs, "RGCREC", "dev0")(ctx, func(recorder.Msg) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("observer: read %d recorded messages: %v", n, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if err := ojs.DeleteStream(short, "RGCREC"); err == nil {
		t.Fatal("observer deleted the recording")
	}
	if err := js.DeleteStream(short, "RGCREC"); err == nil {
		t.Fatal("the daemon deleted the recording")
	}
}
