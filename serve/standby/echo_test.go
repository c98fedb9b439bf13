package standby

import (
	"errors"
	"slices"
	"testing"

	"rgcpred/stream"
)

// echoNet simulates the server between a holder's gate, a standby's gate
// and the device: a message published while swallowing is written into a
// dying connection (accepted, never delivered); the others are delivered
// in order to the device and, as echoes, to both gates.
type echoNet struct {
	swallow, down bool
	gen           uint64
	rev           uint64
	queue         []stream.Pos
	device        []int64
	revs          map[int64]uint64
}

func (n *echoNet) send(_ string, p stream.Pos, rev uint64, _ []byte) error {
	switch {
	case n.down:
		return ErrNotConnected
	case n.swallow:
		return nil
	}
	n.queue = append(n.queue, p)
	n.revs[p.Bin] = rev
	return nil
}

func (n *echoNet) deliver(gates ...*Gate) {
	for _, p := range n.queue {
		n.device = append(n.device, p.Bin)
		for _, g := range gates {
			g.Observe(p)
		}
	}
	n.queue = n.queue[:0]
}

// TestGateEchoRepublish reproduces the loss of a holder's messages written
// into a connection that died (its NATS node killed): the standby drops
// its copies on the holder's next message, nobody else has them. With the
// echo ring the holder publishes them again after the reconnect, before
// anything newer, with their original lease revision; without it they
// are lost.
func TestGateEchoRepublish(t *testing.T) {
	for _, c := range []struct {
		name        string
		echo        bool
		idle        bool // no frame after the reconnect until a lease renewal (Retry)
		downAgain   bool // the first republish finds the connection down again
		want        []int64
		republished uint64
	}{
		{"without the echo ring: lost", false, false, false, []int64{1, 2, 3, 6, 7}, 0},
		{"published again before the next message", true, false, false, []int64{1, 2, 3, 4, 5, 6, 7}, 2},
		{"published again at the renewal", true, true, false, []int64{1, 2, 3, 4, 5, 6, 7}, 2},
		{"connection down again at the first try", true, false, true, []int64{1, 2, 3, 4, 5, 6, 7}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &echoNet{rev: 7, revs: map[int64]uint64{}}
			holder, err := NewGate(func(s string, p stream.Pos, d []byte) error { return n.send(s, p, n.rev, d) },
				func() bool { return true }, 16)
			if err != nil {
				t.Fatal(err)
			}
			if c.echo {
				if err := holder.SetEcho(Echo{Keep: 16, KeepBytes: 1 << 10, Revision: func() uint64 { return n.rev },
					Publish: n.send, Generation: func() uint64 { return n.gen }}); err != nil {
					t.Fatal(err)
				}
			}
			if err := holder.Gain(); err != nil {
				t.Fatal(err)
			}
			standby, err := NewGate(func(string, stream.Pos, []byte) error { return nil }, func() bool { return false }, 16)
			if err != nil {
				t.Fatal(err)
			}
			frame := func(bin int64) {
				t.Helper()
				p := stream.Pos{Epoch: 1, Bin: bin}
				if err := holder.Publish("s", p, []byte{byte(bin)}); err != nil && !errors.Is(err, ErrNotConnected) {
					t.Fatal(err)
				}
				if err := standby.Publish("s", p, []byte{byte(bin)}); err != nil {
					t.Fatal(err)
				}
				n.deliver(holder, standby)
			}
			frame(1)
			frame(2)
			frame(3)
			n.swallow = true // the node dies: 4 and 5 are written into the dead connection
			frame(4)
			frame(5)
			n.swallow = false
			n.gen++ // reconnected to another node; the lease renewed meanwhile
			n.rev = 8
			if c.downAgain {
				n.down = true
				frame(6) // refused: kept behind 4 and 5
				n.down = false
			}
			if c.idle {
				if err := holder.Retry(); err != nil {
					t.Fatal(err)
				}
				n.deliver(holder, standby)
			}
			if !c.downAgain {
				frame(6)
			}
			frame(7)
			if !slices.Equal(n.device, c.want) {
				t.Fatalf("device got %v, want %v", n.device, c.want)
			}
			hs := holder.Stats()
			if hs.Republished != c.republished {
				t.Errorf("republished %d, want %d", hs.Republished, c.republished)
			}
			if c.echo {
				if n.revs[4] != 7 || n.revs[5] != 7 || n.revs[6] != 8 {
					t.Errorf("revisions %v: want 4 and 5 at their original 7, 6 at 8", n.revs)
				}
				if hs.Echoed != 7 || holder.sent.n != 0 || hs.EchoOverflow != 0 {
					t.Errorf("echoed %d, awaiting %d, overflow %d: want 7, 0, 0", hs.Echoed, holder.sent.n, hs.EchoOverflow)
				}
			}
			if ss := standby.Stats(); standby.ring.n != 0 || ss.Matched != 7 {
				t.Errorf("standby keeps %d, matched %d: want 0 and 7", standby.ring.n, ss.Matched)
			}
		})
	}
}

// TestGateEchoBounds: beyond the echo ring's count or bytes the oldest
// unechoed messages are dropped and counted; a reconnect publishes again
// what is left, in order.
func TestGateEchoBounds(t *testing.T) {
	for _, c := range []struct {
		name      string
		keep      int
		keepBytes int
		want      []int64
		overflow  uint64
	}{
		{"count", 3, 1 << 10, []int64{3, 4, 5}, 2},
		{"bytes", 16, 20, []int64{4, 5}, 3},
		{"each message larger than the bytes", 16, 5, nil, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &echoNet{swallow: true, revs: map[int64]uint64{}}
			g, err := NewGate(func(string, stream.Pos, []byte) error { return errors.New("unused") }, func() bool { return true }, 16)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.SetEcho(Echo{Keep: c.keep, KeepBytes: c.keepBytes, Revision: func() uint64 { return 1 },
				Publish: n.send, Generation: func() uint64 { return n.gen }}); err != nil {
				t.Fatal(err)
			}
			if err := g.Gain(); err != nil {
				t.Fatal(err)
			}
			for i := range int64(5) {
				if err := g.Publish("s", stream.Pos{Epoch: 1, Bin: i + 1}, make([]byte, 10)); err != nil {
					t.Fatal(err)
				}
			}
			n.swallow = false
			n.gen++
			if err := g.Retry(); err != nil {
				t.Fatal(err)
			}
			n.deliver(g)
			if !slices.Equal(n.device, c.want) {
				t.Fatalf("published again %v, want %v", n.device, c.want)
			}
			if st := g.Stats(); st.EchoOverflow != c.overflow || st.Republished != uint64(len(c.want)) {
				t.Fatalf("overflow %d, republished %d: want %d, %d", st.EchoOverflow, st.Republished, c.overflow, len(c.want))
			}
		})
	}
}

// TestGateEchoAllocs: publishing as the holder and dropping the echoed
// message allocates nothing once the ring's buffers have grown.
func TestGateEchoAllocs(t *testing.T) {
	var last stream.Pos
	send := func(_ string, p stream.Pos, _ uint64, _ []byte) error { last = p; return nil }
	g, err := NewGate(func(string, stream.Pos, []byte) error { return nil }, func() bool { return true }, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetEcho(Echo{Keep: 16, KeepBytes: 1 << 20, Revision: func() uint64 { return 1 }, Publish: send,
		Generation: func() uint64 { return 0 }}); err != nil {
		t.Fatal(err)
	}
	if err := g.Gain(); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256)
	var i int64
	step := func() {
		i++
		_ = g.Publish("s", stream.Pos{Epoch: 1, Bin: i}, data)
		if i%2 == 0 {
			g.Observe(last) // echoes come in twos
		}
	}
	for range 64 {
		step()
	}
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Fatalf("%v allocations per published message, want 0", a)
	}
}
