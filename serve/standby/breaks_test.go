package standby

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// TestBreaksArrived: a gap in the frames makes an instance that published
// since BreakMargin before the last frames came through publish again
// from the last position it had then; contiguous frames, an instance that
// published nothing meanwhile, and the first message never do.
func TestBreaksArrived(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	pos := func(bin int64) stream.Pos { return stream.Pos{Epoch: 1, Bin: bin} }
	type msg struct {
		at          time.Time
		first, last int64
		pos         stream.Pos // the gate's last position then (pos(-1): none)
		published   uint64
		missed      bool // frames missed live, from a tail's answer (Recovered)
	}
	// Frames 0..9, 10..19, ... every 10 ms, each followed by one decision.
	steady := func(n int) []msg {
		var ms []msg
		for i := range n {
			p := pos(int64(i*10 - 1))
			ms = append(ms, msg{at: t0.Add(time.Duration(i) * 10 * time.Millisecond), first: int64(i * 10), last: int64(i*10 + 9),
				pos: p, published: uint64(i)})
		}
		return ms
	}
	epochStart := func(e uint32) stream.Pos { return stream.Pos{Epoch: e, Bin: stream.EventBin, Index: math.MinInt32} }
	for _, c := range []struct {
		name  string
		msgs  []msg // only the last may report a gap
		again bool
		from  stream.Pos
	}{
		{name: "contiguous frames", msgs: steady(50)},
		{name: "the first message", msgs: []msg{{at: t0, first: 500, last: 509, pos: pos(-1)}}},
		{name: "a gap after 50 messages: from 250 ms before the last came", msgs: append(steady(50),
			msg{at: ms(2500), first: 3000, last: 3009, pos: pos(499), published: 50}),
			again: true, from: pos(239)}, // message 24 arrived at 240 ms = 490 - 250
		{name: "a gap after 5 messages: every kept one", msgs: append([]msg{{at: t0, first: 0, last: 9, pos: pos(-1)}}, append(steady(5)[1:],
			msg{at: ms(2500), first: 3000, last: 3009, pos: pos(49), published: 5})...),
			again: true, from: epochStart(1)},
		{name: "a gap after a reset: the new epoch's only", msgs: append(steady(50),
			msg{at: ms(2500), first: 3000, last: 3009, pos: stream.Pos{Epoch: 2, Bin: stream.EventBin}, published: 51}),
			again: true, from: epochStart(2)},
		{name: "a gap, nothing published since", msgs: append(steady(50),
			msg{at: ms(2500), first: 3000, last: 3009, pos: pos(499), published: 24}), again: false},
		{name: "a tail's answer continuing the frames: a gap all the same", msgs: append(steady(50),
			msg{at: ms(2500), first: 500, last: 1523, pos: pos(499), published: 50, missed: true}),
			again: true, from: pos(239)},
		{name: "a tail's answer, nothing published since", msgs: append(steady(50),
			msg{at: ms(2500), first: 500, last: 1523, pos: pos(499), published: 24, missed: true}), again: false},
		{name: "frames going back (a reset's numbering) are no gap", msgs: append(steady(50),
			msg{at: ms(500), first: 0, last: 9, pos: pos(499), published: 50}), again: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b breaks
			for i, m := range c.msgs {
				p, seen := m.pos, m.pos != pos(-1)
				if !seen {
					p = stream.Pos{}
				}
				from, again := b.arrived(m.at, m.first, m.last, p, seen, m.published, m.missed)
				if i < len(c.msgs)-1 {
					if again {
						t.Fatalf("message %d (frames %d..%d): again from %v, want nothing", i, m.first, m.last, from)
					}
					continue
				}
				if again != c.again || (again && from != c.from) {
					t.Fatalf("last message: again %v, from %v; want %v, %v", again, from, c.again, c.from)
				}
			}
		})
	}
}

// TestBreakRepublish: the holder publishes three decisions messages; the
// device hears the first two, then a cut link swallows the third on its
// way to the device (its echo still comes back to the holder) and the
// device's frames with it. When frames come again, after a gap, the
// holder publishes what it sent just before again, and only then the
// decisions of the frames after the gap: the device, whose connection
// never broke, takes the third exactly once and in position order.
func TestBreakRepublish(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	a := startGroup(t, s.ClientURL(), "a")
	embedtest.Wait(t, "a holds the lease", a.g.Lease().Held)
	dc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	var (
		mu    sync.Mutex
		fence stream.Fence
		taken []stream.Pos
	)
	listen := func() *nats.Subscription {
		sub, err := dc.Subscribe(stream.SpikesSubject("dev0"), func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			if fence.Admit(m.Header, time.Now()) {
				p, _ := stream.ParsePos(m.Header.Get(stream.PosHeader))
				taken = append(taken, p)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := dc.Flush(); err != nil {
			t.Fatal(err)
		}
		return sub
	}
	got := func() []stream.Pos { mu.Lock(); defer mu.Unlock(); return slices.Clone(taken) }
	pos := func(bin int64) stream.Pos { return stream.Pos{Epoch: 1, Bin: bin} }
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// frames is a frames message arriving at the holder, then the
	// decisions message its last frame produces.
	frames := func(when time.Duration, first, last int64) {
		t.Helper()
		a.mu.Lock()
		a.r.Arrived(at(when), first, last)
		err := a.r.Publish(stream.SpikesSubject("dev0"), 1, last, []byte{1})
		a.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		embedtest.Wait(t, fmt.Sprintf("the echo of %d", last), func() bool { return a.r.resend.sent.reached(pos(last)) })
	}
	sub := listen()
	frames(0, 0, 9)
	frames(10*time.Millisecond, 10, 19)
	embedtest.Wait(t, "the device took two", func() bool { return len(got()) == 2 })
	if err := sub.Unsubscribe(); err != nil { // the link to the device cut
		t.Fatal(err)
	}
	frames(20*time.Millisecond, 20, 29)
	listen() // healed; frames 30..1999 were lost on the way to the holder
	frames(2*time.Second, 2000, 2009)
	want := []stream.Pos{pos(9), pos(19), pos(29), pos(2009)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(got()) < len(want) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	if err := dc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a repeated copy taken again would be here by now
	if g := got(); !slices.Equal(g, want) {
		t.Fatalf("the device took %v, want %v (fence %+v)", g, want, fence.Stats())
	}
	if st := fence.Stats(); st.Repeated != 2 {
		t.Fatalf("fence %+v: want the copies of the two messages it had dropped as repeated", st)
	}
	if n := a.r.GapCopies(); n != 3 {
		t.Fatalf("%d copies counted, want the 3 messages kept", n)
	}
	next := int64(2010)
	if n := testing.AllocsPerRun(1000, func() {
		a.r.Arrived(time.Now(), next, next+9)
		next += 10
	}); n != 0 {
		t.Fatalf("%v allocations per frames message without a gap, want 0", n)
	}
}
