package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// gathered sums the samples of metric name in s's registry.
func gathered(t *testing.T, s *Service, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// startJetStream starts an embedded NATS server with JetStream, stopped
// at the end of the test.
func startJetStream(t *testing.T) *env {
	t.Helper()
	srv := embedtest.JetStreamServer(t, embednats.Options{})
	return &env{srv: srv, url: srv.ClientURL()}
}

// recordingSvc is a service serving dev0 with the flight recorder on
// (stream REC).
type recordingSvc struct {
	s  *Service
	nc *nats.Conn
	js jetstream.JetStream
	// stop ends Run and the recorder, failing the test on Run's error.
	stop func()
}

func startRecording(t *testing.T, e *env, f *fixture, rec recorder.Config) *recordingSvc {
	t.Helper()
	return startRecordingWith(t, e, fakeLoader(f.ids), rec)
}

// startRecordingWith is startRecording serving the models of load.
func startRecordingWith(t *testing.T, e *env, load Loader, rec recorder.Config) *recordingSvc {
	t.Helper()
	s, err := New(Config{Devices: []string{"dev0"}, Load: load, MaxBatch: 3, PublishSilence: true, Stagger: true,
		Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	nc, js := embedtest.Connect(t, e.url, s.ConnOptions()...)
	ctx, cancel := context.WithCancel(context.Background())
	rec.Stream = "REC"
	stopRec, err := s.EnableJetStream(ctx, nc, JetStreamFeatures{Record: rec})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nc) }()
	var once sync.Once
	r := &recordingSvc{s: s, nc: nc, js: js, stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
			stopRec()
		})
	}}
	t.Cleanup(r.stop)
	checkFor(t, waitLimit, func() error { return awaited("service ready", s.Ready()) })
	return r
}

// TestRecordAndAudit: a daemon with the flight recorder on serves a
// session; the audit re-runs the recording with the same model and finds
// the recorded decisions, and finds differences with another model.
func TestRecordAndAudit(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	r := startRecording(t, e, f, recorder.Config{MaxAge: time.Hour})
	p := newPublisher(t, e, "dev0")
	c := collectAll(t, p)
	publishSplit(t, f, p, 16, nil)
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	r.stop()
	js := r.js
	actx, acancel := context.WithTimeout(context.Background(), time.Minute)
	defer acancel()
	// The stream stores asynchronously: wait until the last decisions are in.
	checkFor(t, waitLimit, func() error {
		rep, err := recorder.Audit(actx, recorder.StreamSource(js, "REC", "dev0"), recorder.AuditConfig{Predictor: fakepred.New(f.ids)})
		switch {
		case err != nil:
			return err
		case !rep.OK() || rep.Recorded != uint64(len(c.Decisions())):
			return fmt.Errorf("recording incomplete: %d of %d decisions recorded, audit OK %v", rep.Recorded, len(c.Decisions()), rep.OK())
		}
		return nil
	})
	rep, err := recorder.Audit(actx, recorder.StreamSource(js, "REC", "dev0"), recorder.AuditConfig{Predictor: fakepred.New(f.ids[1:])})
	if err == nil && rep.OK() {
		t.Fatal("audit with a model lacking a cell passed")
	}
}

// TestJetStreamFeaturesNeedJetStream: without JetStream on the server the
// opt-in features fail at start with the likely cause; with none asked for,
// nothing needs JetStream.
func TestJetStreamFeaturesNeedJetStream(t *testing.T) {
	e := startNATS(t)
	s, err := New(Config{Devices: []string{"dev0"}, Load: fakeLoader([]int{1, 2}), Replica: true, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop, err := s.EnableJetStream(ctx, nc, JetStreamFeatures{})
	if err != nil {
		t.Fatalf("no features: %v", err)
	}
	stop()
	for _, f := range []JetStreamFeatures{
		{Record: recorder.Config{Stream: "REC"}},
		{Standby: standby.GroupConfig{Group: "g"}},
	} {
		if _, err := s.EnableJetStream(ctx, nc, f); err == nil || !strings.Contains(err.Error(), "no JetStream") {
			t.Errorf("features %+v without JetStream: %v", f, err)
		}
	}
}

// TestRecordSessionHeaderRepeated: the flight recorder stores the session
// header at start, again at each stream event (the first stream, a reset)
// and at a reload, so that a recording whose head was evicted still names
// its session.
func TestRecordSessionHeaderRepeated(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	r := startRecording(t, e, f, recorder.Config{MaxAge: time.Hour, MaxBytes: 1 << 30})
	s, js := r.s, r.js
	headers := func() int {
		n := 0
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		_ = recorder.StreamSource(js, "REC", "dev0")(rctx, func(m recorder.Msg) error {
			if m.Kind == recorder.KindSession {
				n++
			}
			return nil
		})
		return n
	}
	if n := headers(); n != 1 {
		t.Fatalf("%d session headers at start, want 1", n)
	}
	p := newPublisher(t, e, "dev0")
	if err := p.PublishFrames(f.frames(f.lo, f.lo+8)); err != nil {
		t.Fatal(err)
	}
	checkFor(t, waitLimit, func() error { return awaited("the header again after the first stream's event", headers() == 2) })
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishFrames(f.frames(f.lo, f.lo+8)); err != nil {
		t.Fatal(err)
	}
	checkFor(t, waitLimit, func() error { return awaited("the header again after the reset's stream event", headers() == 3) })
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	checkFor(t, waitLimit, func() error { return awaited("the header again after the reload", headers() == 4) })
}

// namedArith is a predictor that names its own arithmetic, as the GPU
// engine does (engine.ArithNamer).
type namedArith struct {
	*fakepred.Hash
	arith string
}

func (n namedArith) Arithmetic() string { return n.arith }

// TestRecordSessionArithmetic: the session header stores the arithmetic
// the served predictor names (the GPU engine's "cuda tf32"), and fp32 for
// one that names none.
func TestRecordSessionArithmetic(t *testing.T) {
	f := getFixtureStagger(t, true)
	for _, tc := range []struct {
		name string
		pred rgc.Predictor
		want string
	}{
		{"names none", fakepred.New(f.ids), "fp32"},
		{"cuda tf32", namedArith{fakepred.New(f.ids), "cuda tf32"}, "cuda tf32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startJetStream(t)
			load := func(string, int) (*Model, error) { return &Model{Predictor: tc.pred, Cells: f.ids, Name: "fake"}, nil }
			r := startRecordingWith(t, e, load, recorder.Config{MaxAge: time.Hour})
			var got []string
			checkFor(t, waitLimit, func() error {
				got = got[:0]
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer rcancel()
				_ = recorder.StreamSource(r.js, "REC", "dev0")(rctx, func(m recorder.Msg) error {
					var s recorder.Session
					if m.Kind == recorder.KindSession && json.Unmarshal(m.Data, &s) == nil {
						got = append(got, s.Precision)
					}
					return nil
				})
				return awaited("the session header", len(got) > 0)
			})
			if got[0] != tc.want {
				t.Errorf("recorded precision %q, want %q", got[0], tc.want)
			}
		})
	}
}

// TestAuditReportsInjection: frames injected between the device's (6 at
// its last seq + 1000, 16 at seq 10^12 in one message) and malformed
// frames and control messages change no decision and restart no stream,
// and the flight recorder's audit reports them: the daemon's drop notices
// and its own refusals, by reason.
func TestAuditReportsInjection(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	r := startRecording(t, e, f, recorder.Config{MaxAge: time.Hour})
	p := newPublisher(t, e, "dev0")
	evs, err := p.SubscribeEvents(func(stream.Event, error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Unsubscribe()
	c := collectAll(t, p)
	attacker := newPublisher(t, e, "dev0")
	publishSplit(t, f, p, 16, func(i int) {
		if i != 50 {
			return
		}
		// The device's frames so far reach the server first: the first frame
		// the daemon receives starts the stream, whoever sends it (only the
		// server's permissions and the authenticators tell).
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		fr := f.frames(f.lo, f.lo+6)
		fr.FirstSeq = int64(f.lo+16*i-1) + 1000
		if err := attacker.PublishFrames(fr); err != nil {
			t.Fatal(err)
		}
		far := f.frames(f.lo, f.lo+16)
		far.FirstSeq = 1_000_000_000_000 // one message of 16 frames at seq 10^12
		if err := attacker.PublishFrames(far); err != nil {
			t.Fatal(err)
		}
		_ = attacker.PublishRaw("stim", []byte{stream.Version, stream.TypeFrames})
		_ = attacker.PublishRaw("ctl", []byte{stream.Version, stream.TypeControl, 0, 0, 9, 0, 0, 0})
		_ = attacker.Flush(context.Background())
	})
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	checkFor(t, waitLimit, func() error {
		fr, ctl := p.DaemonDropped()
		return awaited("the drop notices", fr == 23 && ctl == 1)
	})
	r.stop()
	actx, acancel := context.WithTimeout(context.Background(), time.Minute)
	defer acancel()
	var rep *recorder.Report
	want := map[string]uint64{"out_of_stream": 22, stream.ReasonTruncated: 1, stream.ReasonRange: 1}
	checkFor(t, waitLimit, func() error { // the stream stores asynchronously
		var err error
		rep, err = recorder.Audit(actx, recorder.StreamSource(r.js, "REC", "dev0"), recorder.AuditConfig{Predictor: fakepred.New(f.ids)})
		if err != nil {
			return err
		}
		return awaited("the recording complete", rep.OK() && rep.Recorded == uint64(len(c.Decisions())) && maps.Equal(rep.Told, want))
	})
	if !maps.Equal(rep.Told, want) || !maps.Equal(rep.Refused, want) {
		t.Fatalf("told %v, refused %v: want %v each", rep.Told, rep.Refused, want)
	}
	if n := value(t, r.s.m.restarts.WithLabelValues("dev0")); n != 0 || rep.Events != 1 {
		t.Fatalf("%v restarts, %d stream events: want the one stream", n, rep.Events)
	}
	if !strings.Contains(rep.String(), "messages were refused") {
		t.Fatalf("the report does not say so:\n%s", rep)
	}
}
