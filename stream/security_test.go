package stream

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
)

func testKeys(up, down byte) msgauth.DeviceKeys {
	return msgauth.DeviceKeys{Up: bytes.Repeat([]byte{up}, msgauth.KeyLen), Down: bytes.Repeat([]byte{down}, msgauth.KeyLen)}
}

// TestClientRefusals: a Publisher with keys signs what it sends (checked
// with its Up key) and passes on only decisions signed with its Down key
// whose window ends at or before the last frame it sent; everything else
// is dropped and counted by reason. Drop notices are counted, not passed
// as events.
func TestClientRefusals(t *testing.T) {
	nc, ctx := testConn(t)
	k := testKeys(1, 2)
	p, _ := NewPublisher(nc, "devS")
	if err := p.UseKeys(k); err != nil {
		t.Fatal(err)
	}
	up, _ := NewAuth(k.Up)
	down, _ := NewAuth(k.Down)
	other, _ := NewAuth(testKeys(3, 4).Down)
	stim, _ := nc.SubscribeSync(StimSubject("devS"))
	col, err := p.Collect()
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	var events int
	evs, _ := p.SubscribeEvents(func(Event, error) { events++ })
	defer evs.Unsubscribe()
	var notices []Drop
	p.OnDrop(func(d Drop) { notices = append(notices, d) })
	_ = p.Flush(ctx)

	if err := p.PublishFrames(sampleFrames(100, 10)); err != nil { // frames 100..109
		t.Fatal(err)
	}
	m, err := stim.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Check(m); err != nil {
		t.Fatalf("the frames the publisher sent: %v", err)
	}
	if _, ok := SentAt(m); !ok {
		t.Fatal("frames sent without a time header")
	}
	m.Data[len(m.Data)-1] ^= 1
	if err := up.Check(m); err != ErrAuthInvalid {
		t.Fatalf("a frame changed in flight: %v, want %v", err, ErrAuthInvalid)
	}

	decisions := func(ends ...int64) []byte {
		var d Decisions
		for _, e := range ends {
			d.Decisions = append(d.Decisions, Decision{Cell: 1, Kind: KindSilence, End: e, Bin: e + 80, Prob: 0.9})
		}
		b, _ := AppendDecisions(nil, &d)
		return b
	}
	send := func(a *Auth, data []byte, hdr nats.Header) {
		m := &nats.Msg{Subject: SpikesSubject("devS"), Data: data, Header: hdr}
		if a != nil {
			a.Sign(m)
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	send(nil, decisions(105), nil)                                        // no authenticator
	send(other, decisions(105), nil)                                      // another key
	send(down, decisions(105, 109, 110, 5000), nil)                       // two decisions ahead of frame 109
	signed := nats.Header{PosHeader: {"1.105.0"}, GroupHeader: {"g.0.1"}} // a group's message, then its position changed
	send(down, decisions(106), signed)
	m2 := &nats.Msg{Subject: SpikesSubject("devS"), Data: decisions(107), Header: nats.Header{PosHeader: {"1.107.0"}, GroupHeader: {"g.0.1"}}}
	down.Sign(m2)
	m2.Header.Set(PosHeader, "1.900.0")
	_ = nc.PublishMsg(m2)
	ev, _ := AppendEvent(nil, &Event{Reason: EventFirst, Epoch: 1, First: 100, PrevLast: -1})
	drop, _ := AppendDrop(nil, &Drop{Kind: DropControl, Count: 7, Reason: "control_overflow"})
	for _, b := range [][]byte{ev, drop} {
		mm := &nats.Msg{Subject: EventsSubject("devS"), Data: b}
		down.Sign(mm)
		_ = nc.PublishMsg(mm)
	}
	_ = nc.PublishMsg(&nats.Msg{Subject: EventsSubject("devS"), Data: ev}) // unsigned event
	_ = p.Flush(ctx)
	if err := col.WaitFor(ctx, func(d []Decision) bool { return len(d) >= 3 }); err != nil {
		t.Fatal(err)
	}
	// The last message of each subscription is one dropped: with the
	// counters at their sum, every message was handled.
	want := DropStats{Ahead: 2, AuthMissing: 2, AuthInvalid: 2}
	for deadline := time.Now().Add(10 * time.Second); p.Dropped() != want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	var ends []int64
	for _, d := range col.Decisions() {
		ends = append(ends, d.End)
	}
	if len(ends) != 3 || ends[0] != 105 || ends[1] != 109 || ends[2] != 106 {
		t.Fatalf("decisions passed on for windows %v, want [105 109 106]", ends)
	}
	if d := p.Dropped(); d != want {
		t.Fatalf("dropped %+v", d)
	}
	if fr, ctl := p.DaemonDropped(); fr != 0 || ctl != 7 || len(notices) != 1 || events != 1 {
		t.Fatalf("drop notices: %d frames, %d control, %v; %d events", fr, ctl, notices, events)
	}
}

func TestDropCodec(t *testing.T) {
	for _, d := range []Drop{{DropFrames, 1, "overflow"}, {DropControl, 1 << 40, "auth_invalid"}, {DropFrames, 3, "state_request_limited"}} {
		b, err := AppendDrop(nil, &d)
		if err != nil || len(b) != DropLen {
			t.Fatalf("%+v: %d bytes, %v", d, len(b), err)
		}
		var got Drop
		if err := DecodeDrop(b, &got); err != nil || got != d {
			t.Fatalf("round trip of %+v: %+v, %v", d, got, err)
		}
	}
	for _, d := range []Drop{{0, 1, "x"}, {DropFrames, 0, "x"}, {DropFrames, 1, ""}, {DropFrames, 1, "Bad"}, {DropFrames, 1, "a_reason_longer_than_twenty_four"}} {
		if _, err := AppendDrop(nil, &d); err == nil {
			t.Errorf("%+v encoded", d)
		}
	}
	good, _ := AppendDrop(nil, &Drop{DropFrames, 1, "overflow"})
	for i, mut := range []func(b []byte){
		func(b []byte) { b[5] = 1 },
		func(b []byte) { b[30] = 'x' }, // after the reason's terminating zero
		func(b []byte) { b[1] = TypeEvent },
	} {
		b := bytes.Clone(good)
		mut(b)
		var d Drop
		if err := DecodeDrop(b, &d); err == nil {
			t.Errorf("mutation %d decoded", i)
		}
	}
	if err := DecodeDrop(good[:DropLen-1], &Drop{}); err == nil {
		t.Error("truncated notice decoded")
	}
}

// BenchmarkAuth times what authentication adds to one message each way: a
// decisions message of 60 cells signed by the daemon and checked by the
// device, and a one-frame frames message signed by the device and checked
// by the daemon.
func BenchmarkAuth(b *testing.B) {
	k := testKeys(1, 2)
	up, _ := NewAuth(k.Up)
	down, _ := NewAuth(k.Down)
	ds := make([]Decision, 60)
	for i := range ds {
		ds[i] = Decision{Cell: int32(i), Kind: KindSilence, End: 5000, Bin: 5080, Prob: 0.9}
	}
	dec, _ := AppendDecisions(nil, &Decisions{Decisions: ds})
	fr, _ := AppendFrames(nil, sampleFrames(5000, 1))
	for _, c := range []struct {
		name string
		a    *Auth
		m    *nats.Msg
	}{
		{"decisions of 60 cells", down, &nats.Msg{Subject: SpikesSubject("dev0"), Data: dec}},
		{"one frame", up, &nats.Msg{Subject: StimSubject("dev0"), Data: fr, Header: nats.Header{TimeHeader: {"1765000000000000000"}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.a.Sign(c.m)
				if err := c.a.Check(c.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
