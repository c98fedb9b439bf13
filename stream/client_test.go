package stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/embednats"
)

// testConn starts an embedded NATS server and connects to it, both closed
// when t ends, and returns the connection and a context of 10 s.
func testConn(t *testing.T) (*nats.Conn, context.Context) {
	t.Helper()
	s, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return nc, ctx
}

func TestPublisherOverNATS(t *testing.T) {
	nc, ctx := testConn(t)

	if _, err := NewPublisher(nc, "bad.name"); err == nil {
		t.Fatal("bad device name accepted")
	}
	p, err := NewPublisher(nc, "devT")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Status(ctx); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("status with no daemon: %v, want no responders", err)
	}

	// A fake daemon: echo each frames message as one spike decision per
	// frame, answer status, count control messages.
	stim, _ := nc.SubscribeSync(StimSubject("devT"))
	ctl, _ := nc.SubscribeSync(ControlSubject("devT"))
	go func() {
		var f Frames
		for {
			m, err := stim.NextMsg(10 * time.Second)
			if err != nil {
				return
			}
			if DecodeFrames(m.Data, &f) != nil {
				continue
			}
			var d Decisions
			for i, fr := range f.Frames {
				end := f.FirstSeq + int64(i)
				d.Decisions = append(d.Decisions, Decision{Cell: 1, Kind: KindSpike, End: end, Bin: end + 1, Prob: 0.5, FrameTime: fr.Time})
			}
			b, _ := AppendDecisions(nil, &d)
			_ = nc.Publish(SpikesSubject("devT"), b)
		}
	}()
	st, _ := nc.Subscribe(StatusSubject("devT"), func(m *nats.Msg) {
		b, _ := AppendStatus(nil, &Status{LastSeq: 41, Shards: 1, Cells: []int32{1}})
		_ = m.Respond(b)
	})
	defer st.Unsubscribe()

	col, err := p.Collect()
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishFrames(sampleFrames(10, 5)); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishFrames(&Frames{}); err == nil {
		t.Fatal("empty frames published")
	}
	if err := col.WaitFor(ctx, func(d []Decision) bool { return len(d) >= 5 }); err != nil {
		t.Fatal(err)
	}
	got := col.Decisions()
	for i, d := range got {
		if d.End != int64(10+i) || d.FrameTime != sampleFrames(10, 5).Frames[i].Time {
			t.Fatalf("decision %d: %+v", i, d)
		}
	}
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendHistory(make([]History, MaxCellsPerMsg+1)); err != nil {
		t.Fatal(err)
	}
	var c Control
	for i, wantOp := range []uint8{OpReset, OpHistory, OpHistory} {
		m, err := ctl.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeControl(m.Data, &c); err != nil || c.Op != wantOp {
			t.Fatalf("control %d: op %d err %v, want op %d", i, c.Op, err, wantOp)
		}
	}
	if len(c.Histories) != 1 {
		t.Fatalf("second history message has %d cells, want 1", len(c.Histories))
	}
	sts, err := p.Status(ctx)
	if err != nil || sts.LastSeq != 41 {
		t.Fatalf("status %+v, %v", sts, err)
	}
	if err := p.PublishRaw("spikes", []byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := col.WaitFor(ctx, func([]Decision) bool { return col.errs == 1 }); err != nil {
		t.Fatal(err)
	}
}
