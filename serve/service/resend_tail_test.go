package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"rgcpred/serve/daemon"
	"rgcpred/serve/embednats"
	"rgcpred/stream"
)

// TestServiceResendTail: the daemon misses a stream's last 50 frames (its
// subscription gone until the device stopped sending) and no later frame
// shows it the gap. After daemon.TailAfter of silence it asks the device
// for the frames after its last one; a device serving resend requests
// sends them and the decisions are the offline rollout's, with no bin
// filled, also with message keys. With a device that does not serve
// them (NATS "no responders") the daemon asks again TailAfter later, then
// after doubling pauses, and stays at its last frame.
func TestServiceResendTail(t *testing.T) {
	f := getFixture(t)
	tailAt := f.lo + 10*((f.hi-f.lo-50)/10) // the first frame missed
	for _, tc := range []struct {
		name        string
		keys, serve bool
	}{
		{"resent", false, true},
		{"resent with keys", true, true},
		{"no responders", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, reg, p, c := startResendRig(t, f, tc.keys, tc.serve)
			var restore func()
			publishSplit(t, f, p, 10, func(i int) {
				if f.lo+10*i == tailAt {
					waitProcessed(t, p, int64(tailAt-1))
					restore = dropStim(t, s)
				}
			})
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			restore()
			if !tc.serve {
				time.Sleep(4 * daemon.TailAfter) // tries at 1, 2 and 4 TailAfter of silence
				st, err := p.Status(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got := counter(t, reg, "predictord_resend_requests_total", "dev0", "tail"); got < 2 || got > 3 || st.LastSeq != int64(tailAt-1) {
					t.Fatalf("without a responder: %v tail requests, last frame %d; want 2 or 3 and %d", got, st.LastSeq, tailAt-1)
				}
				return
			}
			waitProcessed(t, p, int64(f.hi-1))
			sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
			if got := counter(t, reg, "predictord_resend_requests_total", "dev0", "tail"); got < 1 {
				t.Errorf("%v tail requests, want at least 1", got)
			}
			recoveredAll(t, reg, f.hi-tailAt)
		})
	}
}

// TestServiceResendWhileDown: a group's connection buffers nothing while
// it reconnects (nats.ReconnectBufSize(-1)), so a request published then
// fails at once ("outbound buffer limit exceeded"). The daemon misses a
// stream's last 50 frames and its NATS server stops before the silence's
// tail request: the request is held while the connection is down (asked
// and counted, not refused), sent once the restarted server takes the
// connection back, and the device's answer completes the stream: the
// decisions are the offline rollout's, no bin filled.
func TestServiceResendWhileDown(t *testing.T) {
	f := getFixture(t)
	tailAt := f.lo + 10*((f.hi-f.lo-50)/10) // the first frame missed
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Shutdown() })
	reg := prometheus.NewRegistry()
	s, err := New(Config{Load: fakeLoader(f.ids), ResendWait: time.Second, Registry: reg, Devices: []string{"dev0"}, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), append(s.ConnOptions(), nats.ReconnectBufSize(-1))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nc) }()
	t.Cleanup(func() { cancel(); <-done; nc.Close() })
	checkFor(t, 10*time.Second, func() error { return awaited("the service ready", s.Ready()) })
	p := reconnectingDevice(t, srv.ClientURL())
	c := collectAll(t, p)
	var restore func()
	publishSplit(t, f, p, 10, func(i int) {
		if f.lo+10*i == tailAt {
			waitProcessed(t, p, int64(tailAt-1))
			restore = dropStim(t, s)
		}
	})
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	restore()
	srv.Shutdown()
	srv.WaitForShutdown()
	checkFor(t, 5*time.Second, func() error {
		return awaited("a tail request asked while the connection is down", !nc.IsConnected() &&
			counter(t, reg, "predictord_resend_requests_total", "dev0", "tail") >= 1)
	})
	if srv, err = embednats.Start("127.0.0.1", port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	checkFor(t, 10*time.Second, func() error {
		return awaited(fmt.Sprintf("frame %d processed (connected %v and %v, tail requests %v, bins recovered %v, last %d)", f.hi-1,
			nc.IsConnected(), p.Conn().IsConnected(), counter(t, reg, "predictord_resend_requests_total", "dev0", "tail"),
			counter(t, reg, "predictord_resend_recovered_bins_total", "dev0"), s.devices[0].last.Load()),
			s.devices[0].last.Load() == int64(f.hi-1))
	})
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	recoveredAll(t, reg, f.hi-tailAt)
}

// TestDeviceResendGapWhileDown: a gap's request goes out, its answer is
// lost (the connection dies), and at the wait's deadline the request is
// asked once more while the group's connection is down (it buffers
// nothing then): it is held instead of refused, and the wait does not
// expire. The first frame after the restarted server took the connection
// back sends the held request before it is received, so the wait runs
// from then and holds it, and the device's answer fills the gap with its
// frames: the decisions are the offline rollout's, no bin filled. The
// device's reader and processor are driven by hand (one goroutine), so
// the connection is down exactly when the wait's deadline passes.
func TestDeviceResendGapWhileDown(t *testing.T) {
	f := getFixture(t)
	const chunk, gapAt = 20, 5 // the 6th message of 20 frames is lost
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { srv.Shutdown() })
	reg := prometheus.NewRegistry()
	s, err := New(Config{Load: fakeLoader(f.ids), ResendWait: 100 * time.Millisecond, Registry: reg, Devices: []string{"dev0"}, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), append(s.ConnOptions(), nats.ReconnectBufSize(-1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := s.devices[0]
	d.nc = nc
	in := make(chan *nats.Msg, 4096)
	for _, subj := range []string{d.stimSubj, d.ctlSubj, d.resend.prefix + ">"} {
		if _, err := nc.ChanSubscribe(subj, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := reconnectingDevice(t, srv.ClientURL())
	c := collectAll(t, p)
	n := 1 + (f.hi-f.lo+chunk-1)/chunk // the histories, then the frames
	publishSplit(t, f, p, chunk, nil)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	msgs := make([]*nats.Msg, 0, n)
	for len(msgs) < n {
		select {
		case m := <-in:
			msgs = append(msgs, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d messages received", len(msgs), n)
		}
	}
	step := func(m *nats.Msg) { // the reader's and the processor's work for one message
		d.enqueue(m)
		select {
		case it := <-d.resend.answers:
			d.handle(it)
		case it := <-d.work:
			d.handle(it)
		}
	}
	for _, m := range msgs[:1+gapAt] {
		step(m)
	}
	time.Sleep(100 * time.Millisecond) // wall time for the gap: the frame after it is believed
	step(msgs[2+gapAt])                // the frame after the gap: its request goes out
	answer := func() *nats.Msg {
		t.Helper()
		select {
		case m := <-in:
			if !d.resend.isAnswer(m.Subject) {
				t.Fatalf("message on %s, want an answer", m.Subject)
			}
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
		return nil
	}
	answer() // lost with the connection
	srv.Shutdown()
	srv.WaitForShutdown()
	checkFor(t, 5*time.Second, func() error { return awaited("the connection down", !nc.IsConnected()) })
	time.Sleep(150 * time.Millisecond)
	d.tick(time.Now()) // past the deadline: asked once more, held
	if !d.holding() || !d.core.Waiting() {
		t.Fatalf("with the connection down: holding %v, waiting %v; want the request held and the wait on", d.holding(), d.core.Waiting())
	}
	if srv, err = embednats.Start("127.0.0.1", port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	checkFor(t, 5*time.Second, func() error {
		return awaited("both connections back", nc.IsConnected() && p.Conn().IsConnected() &&
			srv.GlobalAccount().Interest(stream.ResendSubject("dev0")) > 0)
	})
	step(msgs[3+gapAt]) // the first frame after the reconnect
	if d.holding() || !d.core.Waiting() {
		t.Fatalf("after the first frame back: holding %v, waiting %v; want the request sent, the wait on", d.holding(), d.core.Waiting())
	}
	step(answer())
	if d.core.Waiting() {
		t.Fatal("still waiting after the answer")
	}
	for _, m := range msgs[4+gapAt:] {
		step(m)
	}
	d.core.Flush()
	d.syncStats()
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	if got := counter(t, reg, "predictord_resend_requests_total", "dev0", "answered"); got != 1 {
		t.Errorf("%v requests answered, want 1", got)
	}
	recoveredAll(t, reg, 0)
}

// recoveredAll checks that resent frames recovered at least want bins
// and that no bin was filled.
func recoveredAll(t *testing.T, reg *prometheus.Registry, want int) {
	t.Helper()
	if got := counter(t, reg, "predictord_resend_recovered_bins_total", "dev0"); got < float64(want) {
		t.Errorf("%v bins recovered, want at least %d", got, want)
	}
	if got := counter(t, reg, "predictord_gap_bins_total", "dev0"); got != 0 {
		t.Errorf("%v gap bins filled, want 0", got)
	}
}

// reconnectingDevice connects device dev0 to url, reconnecting for ever
// every 20 ms, and serves resend requests from its ring.
func reconnectingDevice(t *testing.T, url string) *stream.Publisher {
	t.Helper()
	pc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	p, err := stream.NewPublisher(pc, "dev0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ServeResend(); err != nil {
		t.Fatal(err)
	}
	return p
}
