package service

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/stream"
)

// opsCells are the cells of the operational tests' fake model.
var opsCells = []int{1, 2}

// opsLog is a goroutine-safe log sink.
type opsLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *opsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *opsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// opsNATS starts an embedded server on a free loopback port.
func opsNATS(t *testing.T) string {
	t.Helper()
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv.ClientURL()
}

// opsRun is a service running on its own connection.
type opsRun struct {
	s      *Service
	nc     *nats.Conn
	log    *opsLog
	cancel context.CancelFunc
	done   chan error
}

// opsStart builds a service from cfg (one device, dev0, and the fake
// model unless cfg says otherwise), connects it to url and runs it until
// it is ready; the test's end stops it.
func opsStart(t *testing.T, url string, cfg Config) *opsRun {
	t.Helper()
	if cfg.Devices == nil {
		cfg.Devices = []string{"dev0"}
	}
	if cfg.Load == nil {
		cfg.Load = func(string, int) (*Model, error) {
			return &Model{Predictor: fakepred.New(opsCells), Cells: opsCells, Name: "fake"}, nil
		}
	}
	r := &opsRun{log: &opsLog{}, done: make(chan error, 1)}
	cfg.Log = zerolog.New(r.log)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	if r.nc, err = nats.Connect(url, s.ConnOptions()...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nc.Close)
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	t.Cleanup(r.cancel)
	go func() { r.done <- s.Run(ctx, r.nc) }()
	opsWait(t, 10*time.Second, "service ready", func() bool { return s.Ready() })
	return r
}

// stop cancels Run and returns its result (failing after 10 s).
func (r *opsRun) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10 s after cancel")
		return nil
	}
}

// opsWait polls cond until it holds or the timeout passes.
func opsWait(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// opsPublisher connects a device to url.
func opsPublisher(t *testing.T, url, device string) *stream.Publisher {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := stream.NewPublisher(nc, device)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// opsFrames is n zero frames from seq first.
func opsFrames(first int64, n int) *stream.Frames {
	return &stream.Frames{FirstSeq: first, Frames: make([]stream.Frame, n)}
}

// opsGather returns the value of the gathered metric name with the given
// device label, and whether it is there.
func opsGather(t *testing.T, reg *prometheus.Registry, name, device string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "device" && l.GetValue() == device {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func opsGet(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// TestConnOptionsPing: the service's connection pings the server, by
// default every 2 s with 3 outstanding.
func TestConnOptionsPing(t *testing.T) {
	url := opsNATS(t)
	cases := []struct {
		name        string
		interval    time.Duration
		outstanding int
		wantIv      time.Duration
		wantOut     int
	}{
		{"default", 0, 0, 2 * time.Second, 3},
		{"configured", 150 * time.Millisecond, 5, 150 * time.Millisecond, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Config{Devices: []string{"dev0"}, Log: zerolog.Nop(), PingInterval: c.interval, MaxPingsOutstanding: c.outstanding,
				Load: func(string, int) (*Model, error) {
					return &Model{Predictor: fakepred.New(opsCells), Cells: opsCells}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(url, s.ConnOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if nc.Opts.PingInterval != c.wantIv || nc.Opts.MaxPingsOut != c.wantOut {
				t.Fatalf("ping every %v, %d outstanding; want %v, %d", nc.Opts.PingInterval, nc.Opts.MaxPingsOut, c.wantIv, c.wantOut)
			}
		})
	}
}

// freezer is a TCP proxy that can stop forwarding without closing either
// side: a half-open connection as the client sees it.
type freezer struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); u.Close() })
			go f.pipe(c, u)
			go f.pipe(u, c)
		}
	}()
	return f
}

func (f *freezer) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for f.frozen.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestHalfOpenConnection: when the path to the server stops carrying
// data without closing (a half-open TCP connection), the pings notice it
// within about PingInterval x MaxPingsOutstanding: the service counts a
// disconnect and /readyz answers 503; when the path works again it
// reconnects and is ready.
func TestHalfOpenConnection(t *testing.T) {
	url := opsNATS(t)
	px := newFreezer(t, strings.TrimPrefix(url, "nats://"))
	r := opsStart(t, "nats://"+px.ln.Addr().String(), Config{PingInterval: 100 * time.Millisecond, MaxPingsOutstanding: 2})
	h := r.s.Handler()
	if code, body := opsGet(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz %d %q while connected", code, body)
	}
	px.frozen.Store(true)
	opsWait(t, 5*time.Second, "/readyz 503 on a half-open connection", func() bool {
		code, _ := opsGet(t, h, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	// nats.go runs the disconnect handler on its own callback goroutine, so
	// the counter may trail the connection state by a moment.
	opsWait(t, 5*time.Second, "a disconnect counted", func() bool {
		return value(t, r.s.m.nats.WithLabelValues("disconnect")) >= 1
	})
	px.frozen.Store(false)
	opsWait(t, 15*time.Second, "reconnect after the path works again", func() bool { return r.s.Ready() })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestStaleInput: a daemon waiting for its first frames is ready; once
// frames have flowed and stop for longer than StaleAfter, /readyz answers
// 503 naming the device, a warning is logged once and the frame-age gauge
// grows; frames arriving again make it ready. StaleAfter 0 never goes
// stale.
func TestStaleInput(t *testing.T) {
	cases := []struct {
		name       string
		staleAfter time.Duration
		wantStale  bool
	}{
		{"stale after 300ms", 300 * time.Millisecond, true},
		{"disabled", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := opsNATS(t)
			r := opsStart(t, url, Config{StaleAfter: c.staleAfter, MonitorEvery: 20 * time.Millisecond})
			h := r.s.Handler()
			p := opsPublisher(t, url, "dev0")
			time.Sleep(400 * time.Millisecond) // longer than StaleAfter, but no frames yet
			if code, body := opsGet(t, h, "/readyz"); code != 200 {
				t.Fatalf("/readyz %d %q before any frames", code, body)
			}
			if _, ok := opsGather(t, r.s.reg, "predictord_frame_age_seconds", "dev0"); ok {
				t.Error("frame age exported before any frames")
			}
			if err := p.PublishFrames(opsFrames(0, 10)); err != nil {
				t.Fatal(err)
			}
			opsWait(t, 5*time.Second, "frames counted", func() bool { return value(t, r.s.m.framesIn.WithLabelValues("dev0")) == 10 })
			age, ok := opsGather(t, r.s.reg, "predictord_frame_age_seconds", "dev0")
			if !ok || age < 0 || age > 5 {
				t.Fatalf("frame age %v (exported %v) just after frames", age, ok)
			}
			if !c.wantStale {
				// Nothing to wait for: longer than the other case's
				// StaleAfter and many monitor periods.
				time.Sleep(600 * time.Millisecond)
				if code, body := opsGet(t, h, "/readyz"); code != 200 {
					t.Fatalf("/readyz %d %q with stale detection off", code, body)
				}
				return
			}
			var code int
			var body string
			opsWait(t, 5*time.Second, "/readyz 503 after frames stopped", func() bool {
				code, body = opsGet(t, h, "/readyz")
				return code != 200
			})
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "no frames from device dev0 for") {
				t.Fatalf("/readyz %d %q after frames stopped, want 503 naming dev0", code, body)
			}
			if age2, _ := opsGather(t, r.s.reg, "predictord_frame_age_seconds", "dev0"); age2 < c.staleAfter.Seconds() {
				t.Errorf("frame age %v s after %v without frames", age2, c.staleAfter)
			}
			opsWait(t, 5*time.Second, "ready gauge 0 while stale", func() bool { return value(t, r.s.m.ready) == 0 })
			opsWait(t, 5*time.Second, "stale warning logged", func() bool { return strings.Contains(r.log.String(), "no frames from device dev0") })
			time.Sleep(100 * time.Millisecond) // several more monitor periods: no second warning
			if n := strings.Count(r.log.String(), "no frames from device dev0"); n != 1 {
				t.Errorf("stale warning logged %d times, want once:\n%s", n, r.log)
			}
			if err := p.PublishFrames(opsFrames(10, 10)); err != nil {
				t.Fatal(err)
			}
			opsWait(t, 5*time.Second, "ready after frames resume", func() bool { code, _ := opsGet(t, h, "/readyz"); return code == 200 })
			opsWait(t, 5*time.Second, "resume logged", func() bool { return strings.Contains(r.log.String(), "frames arrive again") })
		})
	}
}

// TestDroppedMessages: when the NATS client drops messages of a slow
// consumer, predictord_nats_dropped_messages_total counts the messages
// (not the episodes), and every message published is accounted for:
// processed, dropped on the full work queue, or dropped by NATS.
func TestDroppedMessages(t *testing.T) {
	url := opsNATS(t)
	r := opsStart(t, url, Config{QueueLen: 4, MonitorEvery: 20 * time.Millisecond})
	// Enough messages to fill every buffer before NATS and then some.
	msgs := 2*cap(r.s.devices[0].raw) + 1000
	p := opsPublisher(t, url, "dev0")
	var stim *subscription
	r.s.subsMu.Lock()
	for _, sub := range r.s.subs {
		if sub.sub.Subject == stream.StimSubject("dev0") {
			stim = sub
		}
	}
	r.s.subsMu.Unlock()
	if stim == nil {
		t.Fatal("no stim subscription tracked")
	}
	// Holding the log limiter stalls the processor on its first rejected
	// message and the reader on its first overflow; then the subscription's
	// channel (device.raw) fills and NATS drops the rest.
	r.s.limiter.mu.Lock()
	locked := true
	defer func() {
		if locked {
			r.s.limiter.mu.Unlock()
		}
	}()
	if err := p.PublishRaw("stim", []byte{0}); err != nil { // truncated: rejected
		t.Fatal(err)
	}
	for i := range msgs {
		if err := p.PublishFrames(opsFrames(int64(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	opsWait(t, 10*time.Second, "every message delivered or dropped", func() bool {
		d, _ := stim.sub.Dropped()
		n, _ := stim.sub.Delivered()
		return int64(d)+n == int64(msgs)+1
	})
	dropped, _ := stim.sub.Dropped()
	delivered, _ := stim.sub.Delivered()
	if dropped < 1000 {
		t.Fatalf("only %d of %d messages dropped: the consumer was not slow", dropped, msgs+1)
	}
	t.Logf("%d messages: %d delivered, %d dropped by NATS", msgs+1, delivered, dropped)
	metric := r.s.m.dropped.WithLabelValues("dev0", stream.StimSubject("dev0"))
	opsWait(t, 5*time.Second, "dropped count exported", func() bool { return value(t, metric) == float64(dropped) })
	if ep := value(t, r.s.m.nats.WithLabelValues("slow_consumer")); ep >= float64(dropped) {
		t.Errorf("%v slow-consumer episodes for %d dropped messages: the test does not tell them apart", ep, dropped)
	}
	r.s.limiter.mu.Unlock()
	locked = false
	framesIn := r.s.m.framesIn.WithLabelValues("dev0")
	overflow := r.s.m.rejected.WithLabelValues("dev0", "overflow")
	opsWait(t, 10*time.Second, "delivered messages processed or overflowed", func() bool {
		return value(t, framesIn)+value(t, overflow)+1 == float64(delivered)
	})
	if got := value(t, framesIn) + value(t, overflow) + value(t, metric) + 1; got != float64(msgs+1) {
		t.Fatalf("%v of %d messages accounted for", got, msgs+1)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if v := value(t, metric); v != float64(dropped) {
		t.Errorf("dropped count %v after drain, want %d", v, dropped)
	}
}

// TestDrainTimeout: a drain held up by a model call that does not return
// is abandoned after DrainTimeout (logged, ErrDrainTimeout, the model left
// open); a drain that finishes in time returns nil.
func TestDrainTimeout(t *testing.T) {
	cases := []struct {
		name  string
		block bool
	}{
		{"blocked model call", true},
		{"drains in time", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := opsNATS(t)
			g := fakepred.NewGate(fakepred.New(opsCells))
			closed := atomic.Bool{}
			load := func(string, int) (*Model, error) {
				return &Model{Predictor: g, Cells: opsCells, Close: func() error { closed.Store(true); return nil }}, nil
			}
			const timeout = 300 * time.Millisecond
			r := opsStart(t, url, Config{Load: load, DrainTimeout: timeout, MaxLag: 0})
			defer func() {
				select {
				case <-g.Release:
				default:
					close(g.Release)
				}
			}()
			p := opsPublisher(t, url, "dev0")
			g.Armed.Store(c.block)
			for _, f := range []*stream.Frames{opsFrames(0, rgc.WindowBins), opsFrames(rgc.WindowBins, 10)} {
				if err := p.PublishFrames(f); err != nil {
					t.Fatal(err)
				}
			}
			if c.block {
				select {
				case <-g.Entered:
				case <-time.After(10 * time.Second):
					t.Fatal("model never called")
				}
			} else {
				opsWait(t, 10*time.Second, "frames processed", func() bool { return r.s.devices[0].last.Load() >= rgc.WindowBins+9 })
			}
			start := time.Now()
			err := r.stop(t)
			took := time.Since(start)
			if !c.block {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if err := r.s.Close(); err != nil || !closed.Load() {
					t.Fatalf("Close after a full drain: %v (model closed %v)", err, closed.Load())
				}
				return
			}
			if !errors.Is(err, ErrDrainTimeout) {
				t.Fatalf("Run returned %v, want ErrDrainTimeout", err)
			}
			if took < timeout || took > timeout+3*time.Second {
				t.Errorf("Run returned %v after cancel, want about %v", took, timeout)
			}
			if !strings.Contains(r.log.String(), "drain timeout: abandoning") {
				t.Errorf("abandonment not logged:\n%s", r.log)
			}
			if err := r.s.Close(); err == nil || closed.Load() {
				t.Errorf("Close while the abandoned call runs: %v (model closed %v), want it left open", err, closed.Load())
			}
			close(g.Release)
			opsWait(t, 10*time.Second, "abandoned goroutines end", func() bool { return !r.s.working.Load() })
			if err := r.s.Close(); err != nil || !closed.Load() {
				t.Errorf("Close after the goroutines ended: %v (model closed %v)", err, closed.Load())
			}
		})
	}
}

// TestTimeBase: a checkpoint trained at another bin rate, window or
// horizon, or on another stimulus mode than the frames', is refused at
// start and on reload (the old model stays); the stream's own time base,
// or none stated, is accepted.
func TestTimeBase(t *testing.T) {
	cases := []struct {
		name    string
		mdl     Model
		wantErr string
		frames  rgc.StimMode // Config.StimMode
	}{
		{"stream's time base", Model{BinRateHz: rgc.BinRateHz, WindowBins: rgc.WindowBins, Horizon: rgc.Horizon}, "", rgc.StimCausal},
		{"rounded like a checkpoint header", Model{BinRateHz: 991.8204361111111}, "", rgc.StimCausal},
		{"not stated", Model{}, "", rgc.StimCausal},
		{"1 kHz", Model{BinRateHz: 1000}, "bin rate 1000.000000 Hz differs", rgc.StimCausal},
		{"sensor rate", Model{BinRateHz: rgc.SensorRateHz}, "differs from the stream's 991.82", rgc.StimCausal},
		{"window", Model{BinRateHz: rgc.BinRateHz, WindowBins: 512}, "window of 512 bins", rgc.StimCausal},
		{"horizon", Model{Horizon: 40}, "horizon of 40 bins", rgc.StimCausal},
		{"zero-phase model, causal frames", Model{StimMode: rgc.StimZeroPhase}, "trained on zero-phase (non-causal, sees 16 bins ahead) bins, the input is causal", rgc.StimCausal},
		{"causal model, zero-phase frames", Model{StimMode: rgc.StimCausal}, "trained on causal (each bin from its own samples) bins, the input is zero-phase", rgc.StimZeroPhase},
		{"zero-phase model and frames", Model{StimMode: rgc.StimZeroPhase}, "", rgc.StimZeroPhase},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			load := func(string, int) (*Model, error) {
				m := c.mdl
				m.Predictor, m.Cells = fakepred.New(opsCells), opsCells
				return &m, nil
			}
			cfg := Config{Devices: []string{"dev0"}, ModelPath: "x.ckpt", Log: zerolog.Nop(), Load: load, StimMode: c.frames}
			_, err := New(cfg)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "x.ckpt") {
				t.Fatalf("New: %v, want an error naming the checkpoint and %q", err, c.wantErr)
			}
			// On reload: start with a good model, then offer the bad one.
			var bad atomic.Bool
			cfg.Load = func(p string, mb int) (*Model, error) {
				if bad.Load() {
					return load(p, mb)
				}
				return &Model{Predictor: fakepred.New(opsCells), Cells: opsCells, BinRateHz: rgc.BinRateHz, StimMode: c.frames, Name: "good"}, nil
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			bad.Store(true)
			if err := s.Reload(); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Reload: %v, want %q", err, c.wantErr)
			}
			if s.model.Load().Name != "good" {
				t.Fatal("the refused model replaced the old one")
			}
		})
	}
}
