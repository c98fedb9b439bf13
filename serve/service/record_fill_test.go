package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/recorder"
)

// setRecorded makes the recording stream REC capture the device's
// subjects (on) or only the session header and fill subjects (off): while
// off the stream stores nothing of what passes, as while it elects a
// leader.
func setRecorded(t *testing.T, js jetstream.JetStream, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "REC")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Subjects = recorder.Subjects("dev0")
	if !on {
		cfg.Subjects = []string{recorder.SessionSubject("dev0"), recorder.FillSubject("dev0")}
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestRecordFillsHole: the recording stream stores nothing of the
// device's subjects for a span of the session (frames, decisions and
// events pass meanwhile); the daemon's filler stores them again on the
// fill subject, and the audit of the recording passes with every
// decision judged. The same recording without the filled messages is
// reported incomplete, with the span as its hole.
func TestRecordFillsHole(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	r := startRecording(t, e, f, recorder.Config{MaxAge: time.Hour, FillEvery: 50 * time.Millisecond, FillSettle: 200 * time.Millisecond})
	p := newPublisher(t, e, "dev0")
	c := collectAll(t, p)
	const chunk = 16
	off, on := (f.hi-f.lo)/chunk/3, 2*(f.hi-f.lo)/chunk/3
	publishSplit(t, f, p, chunk, func(i int) {
		if i != off && i != on {
			return
		}
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitProcessed(t, p, int64(f.lo+i*chunk-1))
		// The daemon published the decisions of the frames processed so
		// far before it counted them processed: once its connection is
		// flushed, the server has queued them for the stream, which
		// stores them whatever its subjects are by then.
		if err := r.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		setRecorded(t, r.js, i == on)
	})
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	cfg := recorder.AuditConfig{Predictor: fakepred.New(f.ids)}
	var rep *recorder.Report
	checkFor(t, waitLimit, func() error {
		actx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if rep, err = recorder.Audit(actx, recorder.StreamSource(r.js, "REC", "dev0"), cfg); err != nil {
			return err
		}
		return awaited(fmt.Sprintf("the recording filled (%d holes, %d of %d decisions recorded, %d filled)", len(rep.Holes), rep.Recorded,
			len(c.Decisions()), rep.Filled), rep.OK() && rep.Recorded == uint64(len(c.Decisions())))
	})
	if rep.Filled == 0 || rep.Unjudged != 0 || rep.Segments != 1 || rep.Frames != uint64(f.hi-f.lo) {
		t.Fatalf("filled recording: %+v", *rep)
	}
	if got := gathered(t, r.s, "predictord_record_filled_total"); got < float64(rep.Filled) {
		t.Fatalf("predictord_record_filled_total %v, want at least the %d messages the audit read", got, rep.Filled)
	}
	// Without the filled messages, the span is a hole.
	var recorded []recorder.Msg
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := recorder.StreamSource(r.js, "REC", "dev0")(ctx, func(m recorder.Msg) error {
		if m.Fill == 0 {
			m.Data = append([]byte(nil), m.Data...)
			recorded = append(recorded, m)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	bare, err := recorder.Audit(ctx, func(ctx context.Context, fn func(recorder.Msg) error) error {
		for _, m := range recorded {
			if err := fn(m); err != nil {
				return err
			}
		}
		return nil
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	from, to := int64(f.lo+off*chunk), int64(f.lo+on*chunk-1)
	if bare.Complete() || !bare.Judged() || len(bare.Holes) != 1 || bare.Holes[0].From != from || bare.Holes[0].To != to || bare.Unjudged == 0 {
		t.Fatalf("the recording without its fills: want one hole of frames %d-%d, each side judged equal; got %+v", from, to, *bare)
	}
}
