package standby

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"rgcpred/stream"
)

func TestPosOrderAndText(t *testing.T) {
	ps := []stream.Pos{
		{Epoch: 1, Bin: stream.EventBin, Index: 0},
		{Epoch: 1, Bin: 1023, Index: 0},
		{Epoch: 1, Bin: 1023, Index: 1},
		{Epoch: 1, Bin: 1024, Index: 0},
		{Epoch: 2, Bin: stream.EventBin, Index: 0},
		{Epoch: 2, Bin: 5, Index: 0},
	}
	for i := range ps {
		for j := range ps {
			if got := ps[i].Less(ps[j]); got != (i < j) {
				t.Errorf("%v < %v = %v, want %v", ps[i], ps[j], got, i < j)
			}
		}
		q, err := stream.ParsePos(ps[i].String())
		if err != nil || q != ps[i] {
			t.Errorf("stream.ParsePos(%q) = %v, %v", ps[i].String(), q, err)
		}
	}
	for _, bad := range []string{"", "1.2", "x.1.2", "1.x.2", "1.2.x", "1.2.3.4", "-1.2.3"} {
		if _, err := stream.ParsePos(bad); err == nil {
			t.Errorf("stream.ParsePos(%q) accepted", bad)
		}
	}
}

func TestGateNext(t *testing.T) {
	g, err := NewGate(func(string, stream.Pos, []byte) error { return nil }, func() bool { return true }, 4)
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		epoch uint32
		bin   int64
		want  stream.Pos
	}{
		{1, stream.EventBin, stream.Pos{Epoch: 1, Bin: stream.EventBin, Index: 0}},
		{1, 1023, stream.Pos{Epoch: 1, Bin: 1023, Index: 0}},
		{1, 1023, stream.Pos{Epoch: 1, Bin: 1023, Index: 1}},
		{1, 1024, stream.Pos{Epoch: 1, Bin: 1024, Index: 0}},
		{2, stream.EventBin, stream.Pos{Epoch: 2, Bin: stream.EventBin, Index: 0}},
		{2, 1023, stream.Pos{Epoch: 2, Bin: 1023, Index: 0}},
	}
	for _, c := range calls {
		if got := g.Next(c.epoch, c.bin); got != c.want {
			t.Errorf("Next(%d, %d) = %v, want %v", c.epoch, c.bin, got, c.want)
		}
	}
}

// gateOp is one step of a gate scenario: publish message i (position
// stream.Pos{Epoch: 1, Bin: i, Index: 0}), observe the holder's message i, gain or lose the lease.
type gateOp struct {
	op string // "pub", "obs", "obs-pos" (observe p), "gain", "lose", "expire", "renew" (holding again, Gain not yet called), "down" and "up" (the connection), "retry"
	i  int64
	p  stream.Pos
}

// forged is the position of the forged header
// (4294967295.9223372036854775807.2147483647).
var forged = stream.Pos{Epoch: 1<<32 - 1, Bin: 1<<63 - 1, Index: 1<<31 - 1}

// TestGate runs scenarios of a standby's gate and checks which messages
// it publishes, in which order, and its counters.
func TestGate(t *testing.T) {
	pubs := func(lo, hi int64) []gateOp {
		var ops []gateOp
		for i := lo; i <= hi; i++ {
			ops = append(ops, gateOp{op: "pub", i: i})
		}
		return ops
	}
	obs := func(lo, hi int64) []gateOp {
		var ops []gateOp
		for i := lo; i <= hi; i++ {
			ops = append(ops, gateOp{op: "obs", i: i})
		}
		return ops
	}
	cat := func(parts ...[]gateOp) []gateOp { return slices.Concat(parts...) }
	cases := []struct {
		name     string
		capacity int
		ops      []gateOp
		want     []int64 // messages published, in order
		stats    GateStats
	}{
		{"holder publishes all", 8, cat([]gateOp{{op: "gain"}}, pubs(1, 5)), []int64{1, 2, 3, 4, 5},
			GateStats{Published: 5}},
		{"standby publishes none", 8, cat(pubs(1, 5), obs(1, 5)), nil,
			GateStats{Held: 5, Matched: 5}},
		{"takeover flushes the unobserved", 8, cat(pubs(1, 5), obs(1, 3), []gateOp{{op: "gain"}}, pubs(6, 7)),
			[]int64{4, 5, 6, 7}, GateStats{Published: 4, Held: 5, Flushed: 2, Matched: 3}},
		// The new holder starts from its own position (5): it re-sends 6,
		// which the device's fence drops.
		{"standby behind the holder", 8, cat(obs(1, 6), pubs(1, 5), []gateOp{{op: "gain"}}, pubs(6, 8)),
			[]int64{6, 7, 8}, GateStats{Published: 3, Suppressed: 5}},
		{"forged position ignored by a standby, then takeover", 8,
			cat(pubs(1, 3), obs(1, 2), []gateOp{{op: "obs-pos", p: forged}}, pubs(4, 5), obs(4, 4), []gateOp{{op: "gain"}}, pubs(6, 7)),
			[]int64{5, 6, 7}, GateStats{Published: 3, Held: 5, Flushed: 1, Matched: 4, Ahead: 1}},
		{"forged position ignored by the holder", 8,
			cat([]gateOp{{op: "gain"}}, pubs(1, 2), []gateOp{{op: "obs-pos", p: forged}, {op: "obs-pos", p: stream.Pos{Epoch: 1, Bin: 3}}}, pubs(3, 4)),
			[]int64{1, 2, 3, 4}, GateStats{Published: 4, Ahead: 2}},
		{"standby: more than MaxAhead frames ahead ignored", 8,
			cat(pubs(1, 2), []gateOp{{op: "obs-pos", p: stream.Pos{Epoch: 1, Bin: 2 + DefaultMaxAhead + 1}}}, pubs(3, 3), []gateOp{{op: "gain"}}),
			[]int64{1, 2, 3}, GateStats{Published: 3, Held: 3, Flushed: 3, Ahead: 1}},
		{"standby: a next epoch's decision ignored, its event believed", 8,
			cat(pubs(1, 2), []gateOp{{op: "obs-pos", p: stream.Pos{Epoch: 2, Bin: 7}}, {op: "obs-pos", p: stream.Pos{Epoch: 2, Bin: stream.EventBin}}}, pubs(3, 3)),
			nil, GateStats{Held: 2, Suppressed: 1, Matched: 2, Ahead: 1}},
		{"forged before any message dropped at the first", 8,
			cat([]gateOp{{op: "obs-pos", p: forged}}, pubs(1, 2), []gateOp{{op: "gain"}}, pubs(3, 3)),
			[]int64{1, 2, 3}, GateStats{Published: 3, Held: 2, Flushed: 2, Ahead: 1}},
		{"observed after takeover", 8, cat(pubs(1, 4), []gateOp{{op: "gain"}}, obs(1, 2), pubs(5, 5)),
			[]int64{1, 2, 3, 4, 5}, GateStats{Published: 5, Held: 4, Flushed: 4}},
		{"overflow loses the oldest", 3, cat(pubs(1, 5), []gateOp{{op: "gain"}}),
			[]int64{3, 4, 5}, GateStats{Published: 3, Held: 5, Flushed: 3, Overflow: 2}},
		{"lose keeps messages for a later gain", 8,
			cat([]gateOp{{op: "gain"}}, pubs(1, 2), []gateOp{{op: "lose"}}, pubs(3, 4), obs(3, 3), []gateOp{{op: "gain"}}, pubs(5, 5)),
			[]int64{1, 2, 4, 5}, GateStats{Published: 4, Held: 2, Flushed: 1, Matched: 1}},
		{"expired holding keeps messages", 8,
			cat([]gateOp{{op: "gain"}}, pubs(1, 1), []gateOp{{op: "expire"}}, pubs(2, 3)),
			[]int64{1}, GateStats{Published: 1, Held: 2}},
		// The lease-lapse race: the holding lapses (11 and 12 kept), a
		// renewal lands and holds again before OnGain calls Gain, 13 is
		// produced; 11 and 12 go out before it, and Gain finds nothing.
		{"renewal after a lapse, before Gain", 8,
			cat([]gateOp{{op: "gain"}}, pubs(10, 10), []gateOp{{op: "expire"}}, pubs(11, 12), []gateOp{{op: "renew"}}, pubs(13, 13),
				[]gateOp{{op: "gain"}}, pubs(14, 14)),
			[]int64{10, 11, 12, 13, 14}, GateStats{Published: 5, Held: 2, Flushed: 2}},
		{"renewal after a lapse, holder's copies observed meanwhile", 8,
			cat([]gateOp{{op: "gain"}}, pubs(10, 10), []gateOp{{op: "expire"}}, pubs(11, 12), obs(11, 11), []gateOp{{op: "renew"}},
				pubs(13, 13), []gateOp{{op: "gain"}}),
			[]int64{10, 12, 13}, GateStats{Published: 3, Held: 2, Flushed: 1, Matched: 1}},
		// An outage: publishes refused while the connection is down are
		// kept and go out first once it is back, in order.
		{"outage: kept, sent before the next", 8,
			cat([]gateOp{{op: "gain"}}, pubs(1, 1), []gateOp{{op: "down"}}, pubs(2, 3), []gateOp{{op: "up"}}, pubs(4, 4)),
			[]int64{1, 2, 3, 4}, GateStats{Published: 4, Held: 2, Flushed: 2}},
		{"outage: kept, sent on retry", 8,
			cat([]gateOp{{op: "gain"}}, pubs(1, 1), []gateOp{{op: "down"}}, pubs(2, 3), []gateOp{{op: "retry"}, {op: "up"}, {op: "retry"}}),
			[]int64{1, 2, 3}, GateStats{Published: 3, Held: 2, Flushed: 2}},
		{"outage longer than the buffer", 2,
			cat([]gateOp{{op: "gain"}}, []gateOp{{op: "down"}}, pubs(1, 4), []gateOp{{op: "up"}}, pubs(5, 5)),
			[]int64{3, 4, 5}, GateStats{Published: 3, Held: 4, Flushed: 2, Overflow: 2}},
		{"outage, then the holder's copies observed as a standby", 8,
			cat([]gateOp{{op: "gain"}}, []gateOp{{op: "down"}}, pubs(1, 2), []gateOp{{op: "lose"}, {op: "up"}}, obs(1, 2), pubs(3, 3)),
			nil, GateStats{Held: 3, Matched: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []int64
			holding, down := true, false
			g, err := NewGate(func(subject string, p stream.Pos, data []byte) error {
				if down {
					return ErrNotConnected
				}
				if want := fmt.Sprint(p.Bin); string(data) != want || subject != "s" {
					t.Errorf("published %q on %q at %v, want %q on s", data, subject, p, want)
				}
				got = append(got, p.Bin)
				return nil
			}, func() bool { return holding }, c.capacity)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range c.ops {
				switch op.op {
				case "pub":
					if err := g.Publish("s", stream.Pos{Epoch: 1, Bin: op.i}, []byte(fmt.Sprint(op.i))); err != nil && !(down && errors.Is(err, ErrNotConnected)) {
						t.Fatal(err)
					}
				case "down", "up":
					down = op.op == "down"
				case "retry":
					if err := g.Retry(); err != nil && !(down && errors.Is(err, ErrNotConnected)) {
						t.Fatal(err)
					}
				case "obs":
					g.Observe(stream.Pos{Epoch: 1, Bin: op.i})
				case "obs-pos":
					g.Observe(op.p)
				case "gain":
					holding = true
					if err := g.Gain(); err != nil && !down {
						t.Fatal(err)
					}
				case "lose":
					g.Lose()
				case "expire":
					holding = false
				case "renew":
					holding = true
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("published %v, want %v", got, c.want)
			}
			if st := g.Stats(); st != c.stats {
				t.Errorf("stats %+v, want %+v", st, c.stats)
			}
		})
	}
}

// TestGateFlushError: a publish error during the flush is reported and
// the remaining messages still go out.
func TestGateFlushError(t *testing.T) {
	var got []int64
	g, err := NewGate(func(_ string, p stream.Pos, _ []byte) error {
		got = append(got, p.Bin)
		if p.Bin == 1 {
			return errors.New("boom")
		}
		return nil
	}, func() bool { return true }, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		if err := g.Publish("s", stream.Pos{Epoch: 1, Bin: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Gain(); err == nil {
		t.Fatal("flush error not reported")
	}
	if !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("flushed %v, want [0 1 2]", got)
	}
}

// TestGateKeepAllocs: keeping a message as a standby reuses the ring's
// buffers once they have grown.
func TestGateKeepAllocs(t *testing.T) {
	g, err := NewGate(func(string, stream.Pos, []byte) error { return nil }, func() bool { return false }, 16)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256)
	var i int64
	for range 32 {
		i++
		_ = g.Publish("s", stream.Pos{Epoch: 1, Bin: i}, data)
	}
	if n := testing.AllocsPerRun(100, func() {
		i++
		_ = g.Publish("s", stream.Pos{Epoch: 1, Bin: i}, data)
	}); n != 0 {
		t.Fatalf("%v allocations per kept message, want 0", n)
	}
}
