package service

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// poisoned returns a one-frame message numbered first whose red intensity
// is v, encoded by hand (the encoder refuses NaN).
func poisoned(first int64, v float32) []byte {
	b := []byte{stream.Version, stream.TypeFrames, 1, 0, 0, 0, 0, 0}
	b = binary.LittleEndian.AppendUint64(b, uint64(first))
	b = binary.LittleEndian.AppendUint64(b, 0)
	for c := range rgc.StimChannels {
		x := float32(0)
		if c == 0 {
			x = v
		}
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// TestPoisonedFramesLoseNothing: mid-stream, under the default --max-lag,
// frames messages numbered 2^53-1 (one with a NaN, rejected; one finite, out
// of the stream) and a renumbered stray frame change no decision: the
// spikes equal the offline rollout's, nothing is skipped, the rejections
// are counted, and the status reply agrees with the metrics.
func TestPoisonedFramesLoseNothing(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	s, _ := startService(t, e, Config{Load: fakeLoader(f.ids), MaxLag: 40, PublishSilence: true})
	p := newPublisher(t, e, "dev0")
	bad := newPublisher(t, e, "dev0")
	col := collectAll(t, p)
	hostile := [][]byte{
		poisoned(stream.MaxSeq-1, float32(math.NaN())), // the 40-byte message of the report
		poisoned(stream.MaxSeq-1, 0.5),
		poisoned(3, 0.5),
	}
	const chunk = 20 // frames per message: fewer than --max-lag
	publishSplit(t, f, p, chunk, func(i int) {
		if i > 0 {
			waitProcessed(t, p, int64(f.lo+i*chunk-1)) // paced: no backlog
		}
		if k := i - 60; k >= 0 && k < len(hostile) {
			if err := bad.PublishRaw("stim", hostile[k]); err != nil {
				t.Fatal(err)
			}
			if err := bad.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
	got := waitSpikes(t, col, f.hi, f.nSpike)
	sameSpikes(t, got, f.want)
	waitProcessed(t, p, int64(f.hi-1))
	if m := value(t, s.m.skipped.WithLabelValues("dev0")); m != 0 {
		t.Fatalf("%v deadline misses after poisoned frames", m)
	}
	for reason, n := range map[string]float64{"non_finite": 1, "out_of_stream": 2} {
		if g := value(t, s.m.rejected.WithLabelValues("dev0", reason)); g != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, g, n)
		}
	}
	st, err := p.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 0 || st.Rejected != 3 || st.Epoch != 1 || st.First != int64(f.lo) {
		t.Fatalf("status %+v: want 0 skipped, 3 rejected, epoch 1 from %d", st, f.lo)
	}
	for _, d := range col.Decisions() {
		if d.Kind == stream.KindSkipped || d.Epoch != 1 {
			t.Fatalf("decision %+v: want no skip, epoch 1", d)
		}
	}
}

// TestControlSurvivesOverflow: with the frames queue full (the model
// blocked), frames messages are dropped and counted, but a reset and a
// history sent then are queued and applied, and the device hears of the
// new stream on the events subject.
func TestControlSurvivesOverflow(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	g := fakepred.NewGate(fakepred.New(f.ids))
	load := func(string, int) (*Model, error) { return &Model{Predictor: g, Cells: f.ids}, nil }
	s, _ := startService(t, e, Config{Load: load, QueueLen: 8})
	p := newPublisher(t, e, "dev0")
	events := make(chan stream.Event, 16)
	sub, err := p.SubscribeEvents(func(ev stream.Event, err error) {
		if err != nil {
			t.Errorf("event: %v", err)
			return
		}
		events <- ev
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := p.PublishFrames(f.frames(f.lo, f.lo+rgc.WindowBins)); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, p, int64(f.lo+rgc.WindowBins-1))
	g.Armed.Store(true) // the model blocks: the next due window stalls the processor
	for b := f.lo + rgc.WindowBins; b < f.lo+rgc.WindowBins+200; b++ {
		if err := p.PublishFrames(f.frames(b, b+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendHistory(f.histories()); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	opsWait(t, 10*time.Second, "a frames message dropped on the full queue", func() bool { return value(t, s.m.rejected.WithLabelValues("dev0", "overflow")) > 0 })
	close(g.Release)
	d := s.devices[0]
	// The history is the last message before the new stream: once it is
	// applied, every frames message of the flood has been queued or
	// dropped (one channel keeps their order), and an empty queue means the
	// next message fits. An empty queue alone is not enough: under load
	// the reader may not yet have moved the flood's tail out of the NATS
	// channel, and that tail would fill the queue again.
	opsWait(t, 10*time.Second, "the history applied and the queue drained, so that the next message fits", func() bool {
		return value(t, s.m.histories.WithLabelValues("dev0")) == float64(len(f.ids)) && d.queuedMsgs.Load() == 0 && d.queuedCtl.Load() == 0
	})
	if err := p.PublishFrames(f.frames(100, 100+rgc.WindowBins)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for { // the new stream (epoch 2) has processed its frames
		st, err := p.Status(ctx)
		if err == nil && st.Epoch == 2 && st.LastSeq >= 100+rgc.WindowBins-1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream after the reset was not processed: status %+v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := value(t, s.m.rejected.WithLabelValues("dev0", "overflow")); n == 0 {
		t.Fatal("no frames message dropped: the queue never overflowed")
	}
	if n := value(t, s.m.rejected.WithLabelValues("dev0", "control_overflow")); n != 0 {
		t.Fatalf("%v control messages dropped", n)
	}
	if r, h := value(t, s.m.resets.WithLabelValues("dev0")), value(t, s.m.histories.WithLabelValues("dev0")); r != 1 || h != float64(len(f.ids)) {
		t.Fatalf("resets %v, histories %v: want 1 and %d", r, h, len(f.ids))
	}
	want := []stream.Event{{Reason: stream.EventFirst, Epoch: 1, First: int64(f.lo), PrevLast: -1}, {Reason: stream.EventReset, Epoch: 2, First: 100}}
	for i, w := range want {
		select {
		case ev := <-events:
			if ev.Reason != w.Reason || ev.Epoch != w.Epoch || ev.First != w.First || i == 0 && ev.PrevLast != -1 {
				t.Fatalf("event %d: %+v, want %+v", i, ev, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d not received", i)
		}
	}
	if st, err := p.Status(context.Background()); err != nil || st.Epoch != 2 || st.First != 100 {
		t.Fatalf("status %+v, %v: want epoch 2 from 100", st, err)
	}
}

// TestRenumberedStreamResendsHistories: a device that restarts its
// numbering without a reset (after its old numbering was silent for
// daemon.DefaultConfirmWait), under the default --max-lag, gets a stream
// event, resends its histories, and from then on receives the offline
// rollout's decisions in the new epoch, none skipped.
func TestRenumberedStreamResendsHistories(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	s, _ := startService(t, e, Config{Load: fakeLoader(f.ids), MaxLag: 40, PublishSilence: true})
	p := newPublisher(t, e, "dev0")
	col := collectAll(t, p)
	events := make(chan stream.Event, 16)
	sub, err := p.SubscribeEvents(func(ev stream.Event, err error) {
		if err == nil {
			events <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	const chunk, shift = 20, 1 << 30
	send := func(lo, hi, shift int) {
		fr := f.frames(lo, hi)
		fr.FirstSeq += int64(shift)
		if err := p.PublishFrames(fr); err != nil {
			t.Fatal(err)
		}
		waitProcessed(t, p, fr.LastSeq())
	}
	for lo := f.lo; lo < f.lo+2000; lo += chunk { // the old numbering
		send(lo, lo+chunk, shift)
	}
	wait := func(want stream.Event) {
		t.Helper()
		select {
		case ev := <-events:
			if ev != want {
				t.Fatalf("event %+v, want %+v", ev, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event %+v", want)
		}
	}
	wait(stream.Event{Reason: stream.EventFirst, Epoch: 1, First: int64(f.lo + shift), PrevLast: -1})
	time.Sleep(daemon.DefaultConfirmWait + 20*time.Millisecond) // the old numbering falls silent
	send(f.lo, f.lo+chunk, 0)                                   // renumbered: a jump back by 2^30
	wait(stream.Event{Reason: stream.EventRestart, Epoch: 2, First: int64(f.lo), PrevLast: int64(f.lo + 2000 - 1 + shift)})
	if err := p.SendHistory(f.histories()); err != nil {
		t.Fatal(err)
	}
	for lo := f.lo + chunk; lo < f.hi; lo += chunk {
		send(lo, min(lo+chunk, f.hi), 0)
	}
	epoch2Spikes := func() int {
		n := 0
		for _, d := range col.Decisions() {
			if d.Epoch == 2 && d.Kind == stream.KindSpike && d.Bin < int64(f.hi) {
				n++
			}
		}
		return n
	}
	opsWait(t, 20*time.Second, "the new epoch's spikes", func() bool { return epoch2Spikes() >= f.nSpike })
	settle(t, col)
	var epoch2 []stream.Decision
	for _, d := range col.Decisions() {
		if d.Epoch == 2 {
			epoch2 = append(epoch2, d)
		}
		if d.Kind == stream.KindSkipped {
			t.Fatalf("skipped decision %+v", d)
		}
	}
	sameSpikes(t, spikesBefore(epoch2, f.hi), f.want)
	if r := value(t, s.m.restarts.WithLabelValues("dev0")); r != 1 {
		t.Fatalf("%v restarts, want 1", r)
	}
}
