package service

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"rgcpred/stream"
)

// counter returns the value of the counter family name with the given
// label values (in the family's label order) from reg, 0 if absent.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(labels) || l.GetValue() != labels[i] {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// dropStim takes the daemon's subscription to the device's frames away
// until the returned function puts it back: the frames published
// meanwhile never reach it, as when its NATS node dies.
func dropStim(t *testing.T, s *Service) (restore func()) {
	t.Helper()
	d := s.devices[0]
	s.subsMu.Lock()
	var sub *nats.Subscription
	for _, x := range s.subs {
		if x.sub.Subject == d.stimSubj {
			sub = x.sub
		}
	}
	s.subsMu.Unlock()
	if sub == nil {
		t.Fatal("no frames subscription")
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := d.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		again, err := d.nc.ChanSubscribe(d.stimSubj, d.raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = again.Unsubscribe() })
		if err := d.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRequests waits until n requests for a gap's frames ended, whatever
// their outcome.
func waitRequests(t *testing.T, reg *prometheus.Registry, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sum float64
		for _, o := range ResendOutcomes {
			if o != "tail" {
				sum += counter(t, reg, "predictord_resend_requests_total", "dev0", o)
			}
		}
		if sum >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v resend requests ended after 10 s, want %v", sum, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestServiceResendFillsGap: the daemon misses 20 frames (its
// subscription gone for a while); a device serving resend requests sends
// them again and the daemon's decisions are the offline rollout's, with
// no bin filled, also with message keys. A device that does not serve
// them gets the gap filled by holding, counted as "none".
func TestServiceResendFillsGap(t *testing.T) {
	f := getFixture(t)
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
			gapAt := f.lo + 3000
			var restore func()
			publishSplit(t, f, p, 10, func(i int) {
				switch f.lo + 10*i {
				case gapAt:
					waitProcessed(t, p, int64(gapAt-1))
					restore = dropStim(t, s)
				case gapAt + 20:
					if err := p.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
					restore()
				case gapAt + 30:
					// A real-time device sends about 100 frames in the
					// wait; this one waits for its end rather than send a
					// backlog of more than the 1024 frames the core holds.
					waitRequests(t, reg, 1)
				}
			})
			if !tc.serve {
				waitProcessed(t, p, int64(f.hi-1))

				if got := counter(t, reg, "predictord_resend_requests_total", "dev0", "none"); got != 1 {
					t.Fatalf("requests without a responder: %v counted none, want 1", got)
				}
				if got := counter(t, reg, "predictord_gap_bins_total", "dev0"); got != 20 {
					t.Fatalf("gap bins %v, want 20 filled", got)
				}
				return
			}
			sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
			for _, m := range []struct {
				name  string
				label []string
				want  float64
			}{
				{"predictord_resend_requests_total", []string{"dev0", "answered"}, 1},
				{"predictord_resend_recovered_bins_total", []string{"dev0"}, 20},
				{"predictord_gap_bins_total", []string{"dev0"}, 0},
				{"predictord_filled_decisions_total", []string{"dev0"}, 0},
			} {
				if got := counter(t, reg, m.name, m.label...); got != m.want {
					t.Errorf("%s%v = %v, want %v", m.name, m.label, got, m.want)
				}
			}
			if st := p.ResendServed(); st.Answered != 1 || st.Frames != 20 {
				t.Errorf("device served %+v, want one answer of 20 frames", st)
			}
		})
	}
}

// TestServiceResendAnswersChecked: answers that fail the checks of a
// frames message are refused and counted, never given to the core: one
// without the device's authenticator (keys configured), one that does
// not decode.
func TestServiceResendAnswersChecked(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	reg := prometheus.NewRegistry()
	ks := newKeys(t, "dev0")
	s, _ := startService(t, e, Config{Load: fakeLoader(f.ids), ResendWait: time.Second, Registry: reg, Keys: ks})
	d := s.devices[0]
	forger := newPublisher(t, e, "dev0").Conn()
	good, _ := stream.NewAuth(ks["dev0"].Up)
	frames, err := stream.AppendFrames(nil, f.frames(100, 110))
	if err != nil {
		t.Fatal(err)
	}
	subject := d.resend.prefix + "100.10"
	unsigned := &nats.Msg{Subject: subject, Data: frames}
	truncated := &nats.Msg{Subject: subject, Data: frames[:len(frames)-1]}
	good.Sign(truncated)
	for _, m := range []*nats.Msg{unsigned, truncated} {
		if err := forger.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) &&
		(counter(t, reg, "predictord_frames_rejected_total", "dev0", stream.ReasonAuthMissing) < 1 ||
			counter(t, reg, "predictord_frames_rejected_total", "dev0", stream.ReasonTruncated) < 1) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, r := range []string{stream.ReasonAuthMissing, stream.ReasonTruncated} {
		if got := counter(t, reg, "predictord_frames_rejected_total", "dev0", r); got != 1 {
			t.Errorf("answers refused as %s: %v, want 1", r, got)
		}
	}
	if got := counter(t, reg, "predictord_frames_total", "dev0"); got != 0 {
		t.Errorf("%v frames taken from refused answers", got)
	}
}

// startResendRig starts a service serving the fixture's cells with a 1 s
// resend wait and its own registry, and device dev0's publisher: with
// keys both sign with per-device keys, with serve the device answers
// resend requests. It returns the service, its registry, the publisher
// and a collector of every decision.
func startResendRig(t *testing.T, f *fixture, keys, serve bool) (*Service, *prometheus.Registry, *stream.Publisher, *stream.Collector) {
	t.Helper()
	e := startNATS(t)
	reg := prometheus.NewRegistry()
	cfg := Config{Load: fakeLoader(f.ids), ResendWait: time.Second, Registry: reg}
	p := newPublisher(t, e, "dev0")
	if keys {
		ks := newKeys(t, "dev0")
		cfg.Keys = ks
		if err := p.UseKeys(ks["dev0"]); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := startService(t, e, cfg)
	if serve {
		if err := p.ServeResend(); err != nil {
			t.Fatal(err)
		}
	}
	return s, reg, p, collectAll(t, p)
}

// TestResenderRequest: only a reply subject of the device's own prefix
// followed by "<first>.<count>" of a valid request names a request.
func TestResenderRequest(t *testing.T) {
	r := &resender{prefix: "_INBOX.abc."}
	for _, tc := range []struct {
		subject string
		first   int64
		count   int
		ok      bool
	}{
		{stream.ResendReply(r.prefix, 100, 10), 100, 10, true},
		{"_INBOX.abc.0.1", 0, 1, true},
		{"_INBOX.abc.1.100.10", 0, 0, false},
		{"_INBOX.other.100.10", 0, 0, false},
		{"_INBOX.abc.100", 0, 0, false},
		{"_INBOX.abc.5.0", 0, 0, false},
		{"_INBOX.abc.5." + strconv.Itoa(stream.MaxResendFrames+1), 0, 0, false},
		{"_INBOX.abc.-1.8", 0, 0, false},
		{"_INBOX.abc.x.8", 0, 0, false},
	} {
		first, count, ok := r.request(tc.subject)
		if first != tc.first || count != tc.count || ok != tc.ok {
			t.Errorf("%q: %d, %d, %v; want %d, %d, %v", tc.subject, first, count, ok, tc.first, tc.count, tc.ok)
		}
	}
}
