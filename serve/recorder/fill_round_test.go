package recorder

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// holeLog records 30 frames messages of 8 frames into REC, the stream
// storing none of messages 10 to 19, and returns the log an instance
// kept of them (over nc's server, through a connection of its own).
func holeLog(t *testing.T, nc *nats.Conn, js jetstream.JetStream) *Log {
	t.Helper()
	if _, err := Ensure(ctxT(t), js, Config{Stream: "REC", Devices: []string{dev}}); err != nil {
		t.Fatal(err)
	}
	log := NewLog(0)
	obs, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	if _, err := obs.Subscribe("rgc."+dev+".>", func(m *nats.Msg) { log.Add(m, m.Subject) }); err != nil {
		t.Fatal(err)
	}
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if i == 10 || i == 20 {
			storedAndLogged(t, nc, js, log, 10, i)
			setSubjects(t, js, i == 20)
		}
		b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: int64(8 * i), Frames: make([]stream.Frame, 8)})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(stream.StimSubject(dev), b); err != nil {
			t.Fatal(err)
		}
	}
	storedAndLogged(t, nc, js, log, 20, 30)
	return log
}

// storedAndLogged flushes nc and waits until REC holds stored messages
// and log logged: the stream stores, and the observer's connection
// delivers to the log, after the publisher's flush returns. More fails
// at once.
func storedAndLogged(t *testing.T, nc *nats.Conn, js jetstream.JetStream, log *Log, stored, logged int) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	st, err := js.Stream(ctx, "REC")
	if err != nil {
		t.Fatal(err)
	}
	embedtest.Wait(t, fmt.Sprintf("%d messages stored and %d logged", stored, logged), func() bool {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		msgs, added := info.State.Msgs, log.n
		log.mu.Unlock()
		if msgs > uint64(stored) || added > uint64(logged) {
			t.Fatalf("REC holds %d messages and the log %d; want %d and %d", msgs, added, stored, logged)
		}
		return msgs == uint64(stored) && added == uint64(logged)
	})
}

// checkWhole reads REC back and fails unless it holds the 30 frames
// messages of holeLog, in order.
func checkWhole(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	var firsts []int64
	for _, m := range readAll(t, StreamSource(js, "REC", dev)) {
		if m.Kind == KindFrames {
			first, _, err := stream.PeekFrames(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			firsts = append(firsts, first)
		}
	}
	want := make([]int64, 30)
	for i := range want {
		want[i] = int64(8 * i)
	}
	if !slices.Equal(firsts, want) {
		t.Fatalf("read frames %v, want %v", firsts, want)
	}
}

// TestFillerUnacknowledged: rounds whose fills the stream never
// acknowledges (the fill subject taken by a subscriber that does not
// answer, as a stream leader that died or was cut off with the messages)
// each give up within Retry, though the JetStream context handed to the
// filler is at its cap of asynchronous publishes awaiting an
// acknowledgement; the filler's own publishes do not stay pending; the
// log's entries stay, and the first round with the stream back fills the
// hole whole.
func TestFillerUnacknowledged(t *testing.T) {
	_, nc, _ := embedtest.JetStream(t, embednats.Options{})
	// A context that stalls a fifth publish awaiting its acknowledgement,
	// as nats.go's default does a 4001st.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4))
	if err != nil {
		t.Fatal(err)
	}
	log := holeLog(t, nc, js)
	subjects := slices.DeleteFunc(Subjects(dev), func(s string) bool { return s == FillSubject(dev) })
	if _, err := js.UpdateStream(ctxT(t), jetstream.StreamConfig{Name: "REC", Subjects: subjects, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	sink, err := nc.Subscribe(FillSubject(dev), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	const retry = 300 * time.Millisecond
	f := NewFiller(js, FillConfig{Stream: "REC", Device: dev, Log: log, Settle: time.Nanosecond, Retry: retry, Wait: 200 * time.Millisecond})
	for round := range 3 {
		start := time.Now()
		err := f.Round(ctxT(t))
		if took := time.Since(start); err == nil || took > retry+time.Second {
			t.Fatalf("round %d with no acknowledgement: %v after %v, want an error within %v", round, err, took, retry+time.Second)
		}
	}
	// Each publish times out Retry after it went out, on the client's
	// timers: a loaded host runs them late.
	embedtest.Wait(t, "no publish pending", func() bool { return f.pub.PublishAsyncPending() == 0 })
	if st := f.Stats(); st.Filled != 0 {
		t.Fatalf("%+v filled: want none", st)
	}
	if err := sink.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	setSubjects(t, js, true)
	if err := f.Round(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Filled != 10 {
		t.Fatalf("filled %+v, want the hole's 10 frames messages", st)
	}
	checkWhole(t, js)
}

// TestFillerServerGone: a round whose server stops under it (the
// filler's connection reconnecting, every request unanswered) ends within
// a few of Wait, not Wait per request of a whole round; the rounds after
// the server is back read through a new consumer and fill the hole.
func TestFillerServerGone(t *testing.T) {
	dir := t.TempDir()
	s := embedtest.JetStreamServer(t, embednats.Options{StoreDir: dir})
	port := s.Addr().(*net.TCPAddr).Port
	nc, js := embedtest.Connect(t, s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	log := holeLog(t, nc, js)
	const wait = 300 * time.Millisecond
	f := NewFiller(js, FillConfig{Stream: "REC", Device: dev, Log: log, Settle: time.Hour, Wait: wait})
	if err := f.Round(ctxT(t)); err != nil { // reads, fills nothing yet
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	f.cfg.Settle = time.Nanosecond
	begin := time.Now()
	err := f.Round(ctxT(t))
	if took := time.Since(begin); err == nil || took > 4*wait+time.Second {
		t.Fatalf("round with the server gone: %v after %v, want an error within %v", err, took, 4*wait+time.Second)
	}
	embedtest.JetStreamServer(t, embednats.Options{Port: port, StoreDir: dir})
	deadline := time.Now().Add(waitLimit)
	for f.Stats().Filled < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("the hole not filled with the server back: %+v", f.Stats())
		}
		if err := f.Round(ctxT(t)); err != nil {
			t.Logf("round while the server comes back: %v", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	if st := f.Stats(); st.Filled != 10 {
		t.Fatalf("filled %+v, want the hole's 10 frames messages", st)
	}
	checkWhole(t, js)
}
