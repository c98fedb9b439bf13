package service

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/base/msgauth"
	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// newKeys returns fresh keys for the devices.
func newKeys(t *testing.T, devices ...string) msgauth.Keys {
	t.Helper()
	ks := msgauth.Keys{}
	for _, d := range devices {
		k := msgauth.DeviceKeys{Up: make([]byte, msgauth.KeyLen), Down: make([]byte, msgauth.KeyLen)}
		_, _ = rand.Read(k.Up)
		_, _ = rand.Read(k.Down)
		ks[d] = k
	}
	return ks
}

// TestAuthenticatedStream: with keys, the daemon refuses frames and
// control messages without the device's authenticator (missing, under
// another key, or a replayed control message), counting each by reason
// and telling the device; the device drops decisions without the
// daemon's; the device's own stream gets the offline rollout's spikes.
func TestAuthenticatedStream(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	ks := newKeys(t, "dev0")
	s, _ := startService(t, e, Config{Load: fakeLoader(f.ids), Keys: ks})
	p := newPublisher(t, e, "dev0")
	if err := p.UseKeys(ks["dev0"]); err != nil {
		t.Fatal(err)
	}
	col := collectAll(t, p)
	evs, err := p.SubscribeEvents(func(stream.Event, error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Unsubscribe()
	// The daemon tells the first refusal at once: the events subscription
	// reaches the server before the attacker's messages, sent on another
	// connection, do.
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	// An attacker: frames far ahead without an authenticator and under
	// another device's key, a reset under that key, and forged decisions.
	attacker := newPublisher(t, e, "dev0")
	if err := attacker.PublishFrames(f.frames(f.lo, f.lo+16)); err != nil {
		t.Fatal(err)
	}
	if err := attacker.UseKeys(newKeys(t, "dev0")["dev0"]); err != nil {
		t.Fatal(err)
	}
	far := f.frames(f.lo, f.lo+16)
	far.FirstSeq = 1 << 40
	if err := attacker.PublishFrames(far); err != nil {
		t.Fatal(err)
	}
	if err := attacker.Reset(); err != nil {
		t.Fatal(err)
	}
	forged, _ := stream.AppendDecisions(nil, &stream.Decisions{Decisions: []stream.Decision{
		{Cell: int32(f.ids[0]), Kind: stream.KindSpike, End: int64(f.lo), Bin: int64(f.lo) + 1, Prob: 1}}})
	if err := attacker.PublishRaw("spikes", forged); err != nil {
		t.Fatal(err)
	}
	if err := attacker.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The device's history message, captured and sent again by the
	// attacker after the device sent it: a replay.
	spy, err := attacker.Conn().SubscribeSync(stream.ControlSubject("dev0"))
	if err != nil {
		t.Fatal(err)
	}
	_ = attacker.Conn().Flush()
	publishSplit(t, f, p, 16, func(i int) {
		if i != 1 {
			return
		}
		m, err := spy.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := attacker.Conn().PublishMsg(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}); err != nil {
			t.Fatal(err)
		}
	})
	sameSpikes(t, waitSpikes(t, col, f.hi, f.nSpike), f.want)

	for reason, want := range map[string]float64{stream.ReasonAuthMissing: 1, stream.ReasonAuthInvalid: 2, stream.ReasonReplayed: 1,
		"out_of_stream": 0, "stale": 0} {
		if got := value(t, s.m.rejected.WithLabelValues("dev0", reason)); got != want {
			t.Errorf("rejected %s: %v, want %v", reason, got, want)
		}
	}
	if d := p.Dropped(); d.AuthMissing != 1 || d.AuthInvalid != 0 || d.Ahead != 0 {
		t.Errorf("device dropped %+v: want the one forged decisions message", d)
	}
	opsWait(t, 5*time.Second, "drop notices for 2 frames and 2 control messages", func() bool {
		fr, ctl := p.DaemonDropped()
		return fr == 2 && ctl == 2
	})
	if st, err := p.Status(context.Background()); err != nil || st.Epoch != 1 || st.First != int64(f.lo) {
		t.Fatalf("status %+v, %v: want the device's stream, epoch 1 from %d", st, err, f.lo)
	}
}

// TestControlFloodKeepsReset: while the processor is stalled (the model
// blocked), a flood of malformed control messages is refused before it is
// queued, so the device's reset and histories sent during it are queued
// and applied; the device hears of the refusals in a few notices, not one
// each.
func TestControlFloodKeepsReset(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	g := fakepred.NewGate(fakepred.New(f.ids))
	load := func(string, int) (*Model, error) { return &Model{Predictor: g, Cells: f.ids}, nil }
	s, _ := startService(t, e, Config{Load: load})
	p := newPublisher(t, e, "dev0")
	var notices int
	notified := make(chan stream.Drop, 64)
	p.OnDrop(func(d stream.Drop) { notified <- d })
	evs, err := p.SubscribeEvents(func(stream.Event, error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Unsubscribe()
	if err := p.PublishFrames(f.frames(f.lo, f.lo+rgc.WindowBins)); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, p, int64(f.lo+rgc.WindowBins-1))
	g.Armed.Store(true) // the model blocks: the next due window stalls the processor
	if err := p.PublishFrames(f.frames(f.lo+rgc.WindowBins, f.lo+rgc.WindowBins+100)); err != nil {
		t.Fatal(err)
	}
	const flood = 5000
	garbage := []byte{stream.Version, stream.TypeControl, 0, 0, 9, 0, 0, 0}
	start := time.Now()
	for i := range flood {
		if err := p.PublishRaw("ctl", garbage); err != nil {
			t.Fatal(err)
		}
		if i%256 == 255 { // a flood the daemon's NATS client delivers whole (no slow consumer)
			opsWait(t, 10*time.Second, "the flood so far refused", func() bool {
				return value(t, s.m.rejected.WithLabelValues("dev0", stream.ReasonRange)) == float64(i+1)
			})
		}
		if i == flood/2 {
			if err := p.Reset(); err != nil {
				t.Fatal(err)
			}
			if err := p.SendHistory(f.histories()); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = p.Flush(context.Background())
	opsWait(t, 10*time.Second, "the flood refused", func() bool {
		return value(t, s.m.rejected.WithLabelValues("dev0", stream.ReasonRange)) == flood
	})
	close(g.Release)
	opsWait(t, 10*time.Second, "the reset and the histories applied", func() bool {
		return value(t, s.m.resets.WithLabelValues("dev0")) == 1 && value(t, s.m.histories.WithLabelValues("dev0")) == float64(len(f.ids))
	})
	if n := value(t, s.m.rejected.WithLabelValues("dev0", "control_overflow")); n != 0 {
		t.Fatalf("%v control messages dropped for room", n)
	}
	var total uint64
	deadline := time.After(5 * time.Second)
	for total < flood {
		select {
		case d := <-notified:
			if d.Kind != stream.DropControl || d.Reason != stream.ReasonRange {
				t.Fatalf("notice %+v", d)
			}
			total += d.Count
			notices++
		case <-deadline:
			t.Fatalf("notices told of %d of %d refusals", total, flood)
		}
	}
	if most := 2 + int(time.Since(start)/dropNoticeEvery); total != flood || notices > most {
		t.Fatalf("%d notices of %d refusals, want at most %d", notices, total, most)
	}
}

// TestRejectReasonsStartAtZero: every reason's counter of every device is
// exported at 0 before any refusal.
func TestRejectReasonsStartAtZero(t *testing.T) {
	f := getFixture(t)
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Devices: []string{"dev0", "dev1"}, Load: fakeLoader(f.ids), Registry: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "frames_rejected_total") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var dev, reason string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "device":
					dev = l.GetValue()
				case "reason":
					reason = l.GetValue()
				}
			}
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("%s %s: %v before any message", dev, reason, m.GetCounter().GetValue())
			}
			seen[dev+"/"+reason] = true
		}
	}
	for _, dev := range []string{"dev0", "dev1"} {
		for _, r := range RejectReasons {
			if !seen[dev+"/"+r] {
				t.Errorf("%s %s: not exported", dev, r)
			}
		}
	}
}
