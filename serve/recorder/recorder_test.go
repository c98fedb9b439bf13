package recorder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/daemon"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

const dev = "dev1"

// waitLimit bounds every wait of the tests (a failure, not a measurement).
const waitLimit = 60 * time.Second

var testCells = []int{3, 5, 8, 13, 21, 34}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// live is a minimal daemon for one device: it feeds what arrives on the
// device's frames and control subjects to a core whose decisions and
// stream events it publishes, as serve/service does.
type live struct {
	nc   *nats.Conn
	core *daemon.Core
	buf  []byte
	pubs int // messages published
	mu   sync.Mutex
	err  error
	// skipEvery makes the core skip (overload) the decisions taken at
	// every skipEvery-th frames message (0: never).
	skipEvery, msgs int
}

func (l *live) Decisions(_ int64, ds []stream.Decision) {
	b, err := stream.AppendDecisions(l.buf[:0], &stream.Decisions{Decisions: ds})
	if err == nil {
		l.buf = b
		err = l.nc.Publish(stream.SpikesSubject(dev), b)
	}
	l.fail(err)
	l.pubs++
}

func (l *live) Batch(int, time.Duration) {}

func (l *live) Stream(ev stream.Event) {
	b, err := stream.AppendEvent(nil, &ev)
	if err == nil {
		err = l.nc.Publish(stream.EventsSubject(dev), b)
	}
	l.fail(err)
	l.pubs++
}

func (l *live) fail(err error) {
	if err != nil && l.err == nil {
		l.err = err
	}
}

func (l *live) handle(m *nats.Msg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch m.Subject {
	case stream.StimSubject(dev):
		var f stream.Frames
		if err := stream.DecodeFrames(m.Data, &f); err != nil {
			l.fail(err)
			return
		}
		l.msgs++
		var backlog int64
		if l.skipEvery > 0 && l.msgs%l.skipEvery == 0 {
			backlog = 1 << 20 // far behind: every decision of this message is skipped
		}
		l.core.Frames(&f, backlog)
	case stream.ControlSubject(dev):
		var c stream.Control
		if err := stream.DecodeControl(m.Data, &c); err != nil {
			l.fail(err)
			return
		}
		l.core.Control(&c)
	}
}

// session is what a recorded session is made of.
type session struct {
	stagger, silence bool
	skipEvery        int
	// streams holds the frames of each stream; a reset comes between two.
	streams []int
	seed    uint64
}

// record runs a live session through the recording stream and returns the
// number of messages recorded.
func record(t *testing.T, nc *nats.Conn, js jetstream.JetStream, ss session, cfg Config) int {
	t.Helper()
	ctx := ctxT(t)
	st, err := Ensure(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sess := Session{Model: "fakepred", Cells: testCells, All: testCells, Stagger: ss.stagger, PublishSilence: ss.silence, Started: time.Now()}
	if err := WriteSession(ctx, js, dev, sess); err != nil {
		t.Fatal(err)
	}
	l := &live{nc: nc, skipEvery: ss.skipEvery}
	mb := 0
	if ss.skipEvery > 0 {
		mb = 2 // several model calls per frame: the later ones are skipped too
	}
	l.core, err = daemon.New(fakepred.New(testCells), l, daemon.Config{Known: testCells, Cells: testCells,
		Stagger: ss.stagger, PublishSilence: ss.silence, MaxLag: 64, MaxBatch: mb})
	if err != nil {
		t.Fatal(err)
	}
	lnc, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer lnc.Close()
	l.nc = lnc
	ch := make(chan *nats.Msg, 1<<16)
	for _, s := range []string{stream.StimSubject(dev), stream.ControlSubject(dev)} {
		if _, err := lnc.ChanSubscribe(s, ch); err != nil {
			t.Fatal(err)
		}
	}
	if err := lnc.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := 1 // the session header
	rng := rand.New(rand.NewPCG(ss.seed, 1))
	// The live daemon handles each message as it arrives, so the
	// recording interleaves input and output as a real session does.
	send := func(subject string, b []byte) {
		if err := nc.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
		sent++
		select {
		case m := <-ch:
			l.handle(m)
			// The daemon's answers reach the server before the next
			// device message: the recording's order then does not
			// depend on when the client flushes.
			if err := lnc.Flush(); err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitLimit):
			t.Fatalf("live daemon did not get message %d", sent-1)
		}
	}
	seq := int64(100)
	for si, n := range ss.streams {
		if si > 0 {
			b, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpReset})
			if err != nil {
				t.Fatal(err)
			}
			send(stream.ControlSubject(dev), b)
			seq = 5000 * int64(si)
		}
		h := stream.Control{Op: stream.OpHistory}
		for _, c := range testCells[:3] {
			hist := stream.History{Cell: int32(c)}
			for j := range hist.Spikes {
				hist.Spikes[j] = rng.IntN(50) == 0
			}
			h.Histories = append(h.Histories, hist)
		}
		b, err := stream.AppendControl(nil, &h)
		if err != nil {
			t.Fatal(err)
		}
		send(stream.ControlSubject(dev), b)
		for k := 0; k < n; k += 8 {
			f := stream.Frames{FirstSeq: seq}
			for range min(8, n-k) {
				var fr stream.Frame
				fr.Time = seq * 1000
				for ch := range fr.LED {
					fr.LED[ch] = rng.Float32()
				}
				f.Frames = append(f.Frames, fr)
				seq++
			}
			b, err := stream.AppendFrames(nil, &f)
			if err != nil {
				t.Fatal(err)
			}
			send(stream.StimSubject(dev), b)
		}
	}
	if err := lnc.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	total := sent + l.pubs
	deadline := time.Now().Add(waitLimit)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxBytes > 0 || int(info.State.Msgs) >= total {
			return int(info.State.Msgs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("recorded %d of %d messages", info.State.Msgs, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuditReplaysRecording: recorded sessions of various settings replay
// to exactly the recorded decisions and stream events.
func TestAuditReplaysRecording(t *testing.T) {
	cases := []struct {
		name string
		ss   session
	}{
		{"spikes only", session{streams: []int{3000}, seed: 1}},
		{"silence and stagger", session{stagger: true, silence: true, streams: []int{3000}, seed: 2}},
		{"reset between streams", session{silence: true, streams: []int{2000, 1500}, seed: 3}},
		{"overload skips", session{stagger: true, silence: true, skipEvery: 7, streams: []int{3000}, seed: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, nc, js := embedtest.JetStream(t, embednats.Options{})
			n := record(t, nc, js, c.ss, Config{Stream: "REC", Devices: []string{dev}})
			rep, err := Audit(ctxT(t), StreamSource(js, "REC", dev), AuditConfig{Predictor: fakepred.New(testCells)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d messages recorded: %+v", n, *rep)
			if !rep.OK() {
				t.Fatalf("audit failed: %+v", rep.Mismatches)
			}
			if rep.Recorded == 0 || rep.Events != uint64(len(c.ss.streams)) {
				t.Fatalf("%d decisions and %d events compared, want some and %d", rep.Recorded, rep.Events, len(c.ss.streams))
			}
			if (c.ss.skipEvery > 0) != (rep.Skipped > 0) {
				t.Fatalf("%d skipped decisions with skipEvery %d", rep.Skipped, c.ss.skipEvery)
			}
			if rep.Session == nil || rep.Session.Stagger != c.ss.stagger {
				t.Fatalf("session header %+v", rep.Session)
			}
			var frames int
			for _, f := range c.ss.streams {
				frames += f
			}
			if rep.Frames != uint64(frames) {
				t.Fatalf("%d frames replayed, want %d", rep.Frames, frames)
			}
		})
	}
}

// readAll copies a recording into memory.
func readAll(t *testing.T, src Source) []Msg {
	t.Helper()
	var msgs []Msg
	if err := src(ctxT(t), func(m Msg) error {
		m.Data = slices.Clone(m.Data)
		msgs = append(msgs, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestAuditFindsDifferences: an altered recording or a different model is
// caught, with the kind of difference counted.
func TestAuditFindsDifferences(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	record(t, nc, js, session{silence: true, streams: []int{2000, 1200}, seed: 5}, Config{Stream: "REC", Devices: []string{dev}})
	msgs := readAll(t, StreamSource(js, "REC", dev))
	// editDecision rewrites the first decision of the n-th decisions message.
	editDecision := func(n int, edit func(ds *stream.Decisions) bool) []Msg {
		out := slices.Clone(msgs)
		for i := range out {
			if out[i].Kind != KindDecisions {
				continue
			}
			if n--; n > 0 {
				continue
			}
			var ds stream.Decisions
			if err := stream.DecodeDecisions(out[i].Data, &ds); err != nil {
				t.Fatal(err)
			}
			if !edit(&ds) {
				out = slices.Delete(out, i, i+1)
				return out
			}
			b, err := stream.AppendDecisions(nil, &ds)
			if err != nil {
				t.Fatal(err)
			}
			out[i].Data = b
			return out
		}
		t.Fatal("too few decisions messages")
		return nil
	}
	// again copies the n-th decisions message after the m-th (n < m), as a
	// holder publishing it again; it returns its decisions' number too.
	again := func(n, m int) ([]Msg, uint64) {
		var idx []int
		for i := range msgs {
			if msgs[i].Kind == KindDecisions {
				idx = append(idx, i)
			}
		}
		var ds stream.Decisions
		if err := stream.DecodeDecisions(msgs[idx[n-1]].Data, &ds); err != nil {
			t.Fatal(err)
		}
		return slices.Insert(slices.Clone(msgs), idx[m-1]+1, msgs[idx[n-1]]), uint64(len(ds.Decisions))
	}
	copied, nCopied := again(5, 9)
	cases := []struct {
		name  string
		msgs  []Msg
		pred  rgc.Predictor
		check func(r *Report) bool
	}{
		{"unaltered", msgs, fakepred.New(testCells), func(r *Report) bool { return r.OK() && r.Copies == 0 }},
		{"decisions message published again", copied, fakepred.New(testCells), func(r *Report) bool { return r.OK() && r.Copies == nCopied }},
		{"decisions message lost", editDecision(5, func(*stream.Decisions) bool { return false }), fakepred.New(testCells),
			func(r *Report) bool { return !r.OK() && r.Missing == 0 && r.Extra > 0 && r.Differ == 0 }},
		{"bin altered", editDecision(9, func(ds *stream.Decisions) bool { ds.Decisions[0].Bin++; return true }), fakepred.New(testCells),
			func(r *Report) bool { return !r.OK() && r.Differ == 1 && r.Missing == 0 && r.Extra == 0 }},
		{"probability altered", editDecision(9, func(ds *stream.Decisions) bool { ds.Decisions[0].Prob += 0.01; return true }), fakepred.New(testCells),
			func(r *Report) bool { return !r.OK() && r.Differ == 1 }},
		{"other model", msgs, shifted{fakepred.New(testCells)},
			func(r *Report) bool { return !r.OK() && r.Differ+r.Missing+r.Extra > 10 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Audit(ctxT(t), MemorySource(c.msgs), AuditConfig{Predictor: c.pred})
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(rep) {
				t.Fatalf("report %+v", *rep)
			}
			if s := rep.String(); strings.HasPrefix(s, "audit PASS") != rep.OK() || !strings.Contains(s, fmt.Sprintf("%d recorded", rep.Recorded)) {
				t.Fatalf("summary %q disagrees with the report", s)
			}
		})
	}
}

// shifted is another model: fakepred's choice for cell 5 moved by one
// class.
type shifted struct{ p rgc.Predictor }

func (s shifted) Predict(b *rgc.Batch, out []float32) error {
	if err := s.p.Predict(b, out); err != nil {
		return err
	}
	for j, c := range b.Cells {
		if c == 5 {
			row := out[j*rgc.NumClasses : (j+1)*rgc.NumClasses]
			last := row[rgc.NumClasses-1]
			copy(row[1:], row[:rgc.NumClasses-1])
			row[0] = last
		}
	}
	return nil
}

// TestAuditCutHead: a recording whose head is gone (the stream's limits,
// or a recording begun mid-stream) is audited from its first complete
// stream; one without any stream start is refused.
func TestAuditCutHead(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	record(t, nc, js, session{silence: true, streams: []int{1500, 1500}, seed: 6}, Config{Stream: "REC", Devices: []string{dev}})
	msgs := readAll(t, StreamSource(js, "REC", dev))
	// Cut everything before the reset of the second stream, the session
	// header included.
	cut := slices.IndexFunc(msgs, func(m Msg) bool {
		var c stream.Control
		return m.Kind == KindControl && stream.DecodeControl(m.Data, &c) == nil && c.Op == stream.OpReset
	})
	if cut < 0 {
		t.Fatal("no reset recorded")
	}
	// A few frames of the first stream stay, as a cut by age would leave them.
	head := slices.Clone(msgs[cut-3 : cut])
	headFrames := 0
	for _, m := range head {
		if m.Kind == KindFrames {
			headFrames++
		}
	}
	rest := slices.Concat(head, msgs[cut:])
	cfg := AuditConfig{Predictor: fakepred.New(testCells), Core: daemon.Config{Known: testCells, Cells: testCells, PublishSilence: true}}
	rep, err := Audit(ctxT(t), MemorySource(rest), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Frames != 1500 || rep.SkippedHead != uint64(headFrames) || rep.Events != 1 {
		t.Fatalf("report %+v", *rep)
	}
	// Without a session header the cells must be given.
	if _, err := Audit(ctxT(t), MemorySource(rest), AuditConfig{Predictor: fakepred.New(testCells)}); err == nil {
		t.Fatal("audit without cells or session header accepted")
	}
	// Cells that differ from the session header's are refused.
	bad := AuditConfig{Predictor: fakepred.New(testCells), Core: daemon.Config{Known: testCells, Cells: testCells[:2]}}
	if _, err := Audit(ctxT(t), MemorySource(msgs), bad); err == nil {
		t.Fatal("cells other than the session's accepted")
	}
	var noStart []Msg
	for _, m := range msgs {
		if m.Kind != KindEvent {
			noStart = append(noStart, m)
		}
	}
	if _, err := Audit(ctxT(t), MemorySource(noStart), cfg); !errors.Is(err, ErrEmpty) {
		t.Fatalf("recording without stream start: %v, want ErrEmpty", err)
	}
}

// TestEnsureLimits: the stream keeps within its byte limit, dropping the
// oldest messages, and takes its age limit; bad configurations are
// refused.
func TestEnsureLimits(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	ctx := ctxT(t)
	for _, bad := range []Config{{Devices: []string{dev}}, {Stream: "X"}, {Stream: "X", Devices: []string{"a.b"}},
		{Stream: "X", Devices: []string{dev}, MaxBytes: -1}} {
		if _, err := Ensure(ctx, js, bad); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
	const limit = 64 << 10
	cfg := Config{Stream: "SMALL", Devices: []string{dev}, MaxBytes: limit, MaxAge: time.Hour, Memory: true}
	record(t, nc, js, session{silence: true, streams: []int{3000}, seed: 7}, cfg)
	st, err := js.Stream(ctx, "SMALL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Bytes > limit || info.State.FirstSeq <= 1 || info.Config.MaxAge != time.Hour {
		t.Fatalf("stream state %+v, config max age %v: want at most %d bytes, the oldest gone, max age 1h",
			info.State, info.Config.MaxAge, limit)
	}
}

// TestStreamSourceOneFilter: the audit's consumer asks the server for one
// filter subject (nats-server 2.9 refuses more) and still reads exactly
// the device's messages, in order, from a stream recording two devices
// (a message on the fill subject without the fill headers is left out).
func TestStreamSourceOneFilter(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	ctx := ctxT(t)
	if _, err := Ensure(ctx, js, Config{Stream: "REC", Devices: []string{dev, "other"}}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 20 {
		for _, d := range []string{dev, "other"} {
			subj := Subjects(d)[i%len(Subjects(d))]
			data := fmt.Sprintf("%s %d", d, i)
			if _, err := js.Publish(ctx, subj, []byte(data)); err != nil {
				t.Fatal(err)
			}
			if d == dev && subj != FillSubject(d) { // a fill without its headers is left out
				want = append(want, data)
			}
		}
	}
	var mu sync.Mutex
	var creates []string
	sub, err := nc.Subscribe("$JS.API.CONSUMER.CREATE.>", func(m *nats.Msg) {
		mu.Lock()
		creates = append(creates, string(m.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range readAll(t, StreamSource(js, "REC", dev)) {
		got = append(got, string(m.Data))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(creates) == 0 {
		t.Fatal("no consumer creation seen")
	}
	for _, c := range creates {
		if strings.Contains(c, `"filter_subjects"`) || (!strings.Contains(c, `"filter_subject":"`+DeviceFilter(dev)+`"`) &&
			!strings.Contains(c, `"filter_subject":"`+FillSubject(dev)+`"`)) {
			t.Fatalf("consumer request %s: want the one filter subject %s or %s", c, DeviceFilter(dev), FillSubject(dev))
		}
	}
}
