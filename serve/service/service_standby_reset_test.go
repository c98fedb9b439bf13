package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/daemon"
	"rgcpred/serve/recorder"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// TestStandbyGroupReload: an instance of a standby group refuses a reload
// (SIGHUP or predictord.reload), saying why and what to do instead; the
// model stays.
func TestStandbyGroupReload(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	a := startReplica(t, e.url, Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}, "a")
	before := a.s.model.Load()
	if err := a.s.Reload(); !errors.Is(err, errStandbyReload) {
		t.Fatalf("reload in a standby group: %v, want %v", err, errStandbyReload)
	}
	nc, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := request(t, nc, "predictord.reload", `{}`)
	if got, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader); got != "500" || !strings.Contains(desc, "restart the group") {
		t.Errorf("reload: error %s %q, want 500 saying to restart the group", got, desc)
	}
	if a.s.model.Load() != before {
		t.Fatal("the model changed")
	}
}

// TestStandbyGroupReset: an operator's reset to a two-instance group,
// requested while the device streams, is a group event: the holder
// announces it on the device's control subject at a frame past its
// receive edge, both instances (and the recording) apply it before that
// frame. Both instances answer once they applied it; their states at the
// end are identical (every cell's generated spikes, next window, the
// stream's first frame: the same decisions), the device sees the reset's
// stream start at the announced frame, and the recording's audit passes.
// A reset while no stream runs is refused with the reason. (Cores that
// receive the announcement at different frames before the announced one:
// daemon's TestCoreResetAt.)
// With message keys, the announcement is signed with the group's key and
// admitted under it by both instances and by the audit.
func TestStandbyGroupReset(t *testing.T) {
	t.Parallel() // waits for most of its time; independent of the other tests
	for _, keyed := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "with keys"}[keyed], func(t *testing.T) {
			t.Parallel() // each case has its own server and group, and mostly waits
			standbyGroupReset(t, keyed)
		})
	}
}

func standbyGroupReset(t *testing.T, keyed bool) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}
	var audit recorder.AuditConfig
	if keyed {
		cfg.Keys = newKeys(t, "dev0")
		groupKey := newKeys(t, "g")["g"].Up
		cfg.StandbyKeys = map[string][]byte{"g": groupKey}
		audit.UpKey, audit.GroupKey = cfg.Keys["dev0"].Up, groupKey
	}
	a := startReplicaRecording(t, e.url, cfg, "a", recorder.Config{Stream: "REC", MaxAge: time.Hour})
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	b := startReplica(t, e.url, cfg, "b")
	checkFor(t, waitLimit, func() error { return awaited("b caught up", b.s.devices[0].sb.Synced()) })
	nc, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reset := []byte(`{"device":"dev0"}`)
	before, err := gatherReplies(nc, "predictord.reset", reset, 2, 2*microResetWait)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range before {
		if code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader); code != "400" || !strings.Contains(desc, "no stream runs") {
			t.Fatalf("reset before any frame: error %s %q, want 400 saying no stream runs", code, desc)
		}
	}

	p := newPublisher(t, e, "dev0")
	if keyed {
		if err := p.UseKeys(cfg.Keys["dev0"]); err != nil {
			t.Fatal(err)
		}
	}
	var evMu sync.Mutex
	var evs []stream.Event
	evSub, err := p.SubscribeEvents(func(ev stream.Event, err error) {
		evMu.Lock()
		defer evMu.Unlock()
		if err == nil {
			evs = append(evs, ev)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = evSub.Unsubscribe() }()
	c := collectAll(t, p)
	var got []*nats.Msg
	var gotErr error
	done := make(chan struct{})
	publishSplit(t, f, p, 8, func(i int) {
		if i == (f.hi-f.lo)/8/4 { // a quarter in, with decisions flowing: the request meets frames in flight
			go func() {
				defer close(done)
				got, gotErr = gatherReplies(nc, "predictord.reset", reset, 2, 2*microResetWait)
			}()
			// The announcement reaches both before the frames resume (a
			// lead of a window is about 130 ms at this test's pace).
			for _, r := range []*replicaSvc{a, b} {
				d := r.s.devices[0]
				checkFor(t, waitLimit, func() error { return awaited("the reset announced", d.resetAt.Load() >= 0) })
			}
		}
		time.Sleep(time.Millisecond)
	})
	<-done
	if gotErr != nil {
		t.Fatal(gotErr)
	}
	var at int64 = -1
	for _, m := range got {
		var r ResetReply
		decode(t, m, &r)
		if r.Resets != 1 {
			t.Fatalf("reply %+v: want the first reset", r)
		}
		if r.Instance == a.s.MicroID() {
			at = r.At
		}
	}
	if at <= int64(f.lo) || at >= int64(f.hi) {
		t.Fatalf("the holder announced the reset at frame %d, want one within the frames sent (%d..%d)", at, f.lo, f.hi)
	}
	for _, r := range []*replicaSvc{a, b} {
		d := r.s.devices[0]
		checkFor(t, waitLimit, func() error { return awaited("every frame processed", d.last.Load() == int64(f.hi-1)) })
	}
	// The instances' states, as a joining standby would receive them.
	states, err := gatherReplies(nc, standby.StateSubject("g", "dev0"), nil, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var snap daemon.Snapshot
	if err := json.Unmarshal(states[0].Data, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Epoch != 2 || snap.First != at {
		t.Fatalf("state of epoch %d from frame %d, want epoch 2 from the announced frame %d", snap.Epoch, snap.First, at)
	}
	if string(states[0].Data) != string(states[1].Data) {
		t.Fatal("the two instances' states differ after the reset")
	}
	for _, r := range []*replicaSvc{a, b} {
		d := r.s.devices[0]
		d.snapMu.Lock()
		st := d.prev
		d.snapMu.Unlock()
		if st.Resets != 1 || st.ResetsLate != 0 || st.ResetsStale != 0 {
			t.Fatalf("resets %d, late %d, stale %d; want one at its frame", st.Resets, st.ResetsLate, st.ResetsStale)
		}
		for _, reason := range []string{stream.ReasonAuthMissing, stream.ReasonAuthInvalid, stream.ReasonReplayed} {
			if v := value(t, r.s.m.rejected.WithLabelValues("dev0", reason)); v != 0 {
				t.Errorf("%s: %v messages refused as %s", r.s.group.Config().ID, v, reason)
			}
		}
	}
	// The device: the reset's stream starts at the announced frame.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitFor(ctx, func(ds []stream.Decision) bool {
		for _, d := range ds {
			if d.Epoch == 2 && d.End >= int64(f.hi)-rgc.Horizon {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	evMu.Lock()
	defer evMu.Unlock()
	if len(evs) != 2 || evs[1].Reason != stream.EventReset || evs[1].First != at {
		t.Fatalf("stream events %+v, want the first stream and the reset's from %d", evs, at)
	}
	// The recording: the audit re-runs it, the announced reset included.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var rep *recorder.Report
	checkFor(t, waitLimit, func() error {
		actx, acancel := context.WithTimeout(context.Background(), time.Minute)
		defer acancel()
		rep, err = recorder.Audit(actx, recorder.StreamSource(js, "REC", "dev0"), recorder.AuditConfig{Predictor: fakepred.New(f.ids), UpKey: audit.UpKey, GroupKey: audit.GroupKey})
		switch got := len(c.Decisions()); {
		case err != nil:
			return err
		case !rep.OK():
			return fmt.Errorf("audit not OK: %+v", *rep)
		case rep.Recorded != uint64(got):
			return fmt.Errorf("%d decisions recorded, %d received by the device", rep.Recorded, got)
		}
		return nil
	})
	t.Logf("reset announced at frame %d; %d decisions, audit: %d matched, %d controls replayed", at, len(c.Decisions()), rep.Matched, rep.Controls)
}

// TestStandbyLateReset: a reset announced for a frame an instance already
// processed (a link slower than the lead) is applied at once and counted
// as reset_late; a standby then no longer counts as synced and catches up
// again from the holder's state, after which both instances' states are
// identical.
func TestStandbyLateReset(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true}
	a := startReplica(t, e.url, cfg, "a")
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	b := startReplica(t, e.url, cfg, "b")
	checkFor(t, waitLimit, func() error { return awaited("b caught up", b.s.devices[0].sb.Synced()) })
	p := newPublisher(t, e, "dev0")
	half := f.lo + (f.hi-f.lo)/2
	if err := p.SendHistory(f.histories()); err != nil {
		t.Fatal(err)
	}
	for lo := f.lo; lo < half; lo += 8 {
		if err := p.PublishFrames(f.frames(lo, min(lo+8, half))); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*replicaSvc{a, b} {
		d := r.s.devices[0]
		checkFor(t, waitLimit, func() error { return awaited("the first half processed", d.last.Load() == int64(half-1)) })
	}
	late, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpResetAt, Epoch: 1, At: int64(half - 100)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Conn().Publish(stream.ControlSubject("dev0"), late); err != nil {
		t.Fatal(err)
	}
	checkFor(t, waitLimit, func() error {
		for _, r := range []*replicaSvc{a, b} {
			if r.s.devices[0].rejected.Load() == 0 {
				return fmt.Errorf("the late reset not counted on %s", r.s.group.Config().ID)
			}
		}
		return nil
	})
	for lo := half; lo < f.hi; lo += 8 {
		if err := p.PublishFrames(f.frames(lo, min(lo+8, f.hi))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	bd := b.s.devices[0]
	checkFor(t, waitLimit, func() error { return awaited("b caught up again", bd.sb.Synced() && bd.sb.Restores() == 2) })
	for _, r := range []*replicaSvc{a, b} {
		d := r.s.devices[0]
		checkFor(t, waitLimit, func() error { return awaited("every frame processed", d.last.Load() == int64(f.hi-1)) })
		d.rejectedMu.Lock()
		n := d.rejectedBy["reset_late"]
		d.rejectedMu.Unlock()
		if n != 1 {
			t.Fatalf("%d late resets counted, want 1", n)
		}
	}
	if !a.s.devices[0].sb.Synced() {
		t.Fatal("the holder no longer synced")
	}
	states, err := gatherReplies(p.Conn(), standby.StateSubject("g", "dev0"), nil, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(states[0].Data) != string(states[1].Data) {
		t.Fatal("the instances' states differ after b caught up again")
	}
}

// gatherReplies sends a request on subject, which every instance receives,
// and returns the first n replies, each within wait of the previous.
func gatherReplies(nc *nats.Conn, subject string, body []byte, n int, wait time.Duration) ([]*nats.Msg, error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return nil, err
	}
	var out []*nats.Msg
	for range n {
		m, err := sub.NextMsg(wait)
		if err != nil {
			return out, fmt.Errorf("%s: %d replies, want %d: %w", subject, len(out), n, err)
		}
		out = append(out, m)
	}
	return out, nil
}
