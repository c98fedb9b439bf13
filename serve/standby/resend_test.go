package standby

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
	"rgcpred/stream"
)

// bins returns the bins of ms' positions (epoch 1, index 0).
func bins(t *testing.T, ms []*nats.Msg) []int64 {
	t.Helper()
	out := make([]int64, 0, len(ms))
	for _, m := range ms {
		p, err := stream.ParsePos(m.Header.Get(stream.PosHeader))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Bin)
	}
	return out
}

// TestSentRing: the ring keeps the last messages in position order,
// refuses a copy published again (not after the newest), answers the
// messages after a position across its wrap-around, and a position older
// than every kept one after it overwrote some gets them all, with the gap
// reported.
func TestSentRing(t *testing.T) {
	r := newSentRing(4)
	at := func(b int64) stream.Pos { return stream.Pos{Epoch: 1, Bin: b} }
	add := func(b int64) {
		r.add(&nats.Msg{Header: nats.Header{stream.PosHeader: {at(b).String()}}}, at(b))
	}
	for _, b := range []int64{10, 11, 12} {
		add(b)
	}
	add(11) // a copy published again: not kept twice
	cases := []struct {
		name  string
		more  []int64 // added before the call
		after int64
		want  []int64
		gap   bool
	}{
		{"after the newest", nil, 12, []int64{}, false},
		{"after the first", nil, 10, []int64{11, 12}, false},
		{"older than the ring, nothing overwritten", nil, 3, []int64{10, 11, 12}, false},
		{"wrapped around", []int64{13, 14, 15}, 12, []int64{13, 14, 15}, false},
		{"the oldest kept", nil, 12, []int64{13, 14, 15}, false},
		{"older than the ring after an overwrite", nil, 10, []int64{12, 13, 14, 15}, true},
		{"between kept positions", nil, 13, []int64{14, 15}, false},
	}
	for _, c := range cases {
		for _, b := range c.more {
			add(b)
		}
		out, gap := r.after(nil, at(c.after))
		if got := bins(t, out); gap != c.gap || len(got) != len(c.want) || len(got) > 0 && (got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1]) {
			t.Errorf("%s: after bin %d = %v, gap %v; want %v, gap %v", c.name, c.after, got, gap, c.want, c.gap)
		}
	}
	if !r.reached(at(15)) || !r.reached(at(14)) || r.reached(at(16)) {
		t.Errorf("reached bins 14, 15, 16: %v, %v, %v; want true, true, false", r.reached(at(14)), r.reached(at(15)), r.reached(at(16)))
	}
}

// TestSentRingAllocs: keeping a message allocates nothing.
func TestSentRingAllocs(t *testing.T) {
	r := newSentRing(64)
	m := &nats.Msg{}
	b := int64(0)
	if n := testing.AllocsPerRun(1000, func() { b++; r.add(m, stream.Pos{Epoch: 1, Bin: b}) }); n != 0 {
		t.Errorf("add allocates %v per message", n)
	}
}

// TestResendCheck: with the device's Up key a request must carry its
// authenticator and a sending time later than the last accepted one; a
// request without a position is malformed; the rate budget refuses what
// exceeds ResendBurst at once and refills at ResendRate.
func TestResendCheck(t *testing.T) {
	key := make([]byte, msgauth.KeyLen)
	_, _ = rand.Read(key)
	up, _ := stream.NewAuth(key)
	other := make([]byte, msgauth.KeyLen)
	_, _ = rand.Read(other)
	forger, _ := stream.NewAuth(other)
	r := &resender{up: up, tokens: ResendBurst}
	req := func(pos string, t int64, a *stream.Auth) *nats.Msg {
		m := &nats.Msg{Subject: stream.SpikesResendSubject("dev0"), Header: nats.Header{
			stream.PosHeader: {pos}, stream.GroupHeader: {"g.0.1"}, stream.TimeHeader: {strconv.FormatInt(t, 10)}}}
		if a != nil {
			a.Sign(m)
		}
		return m
	}
	cases := []struct {
		name string
		m    *nats.Msg
		want string
	}{
		{"signed", req("1.5.0", 100, up), ""},
		{"unsigned", req("1.5.0", 200, nil), stream.ReasonAuthMissing},
		{"another key", req("1.5.0", 200, forger), stream.ReasonAuthInvalid},
		{"replayed", req("1.5.0", 100, up), stream.ReasonReplayed},
		{"no position", req("", 300, up), ResendMalformed},
		{"later", req("1.7.0", 400, up), ""},
	}
	for _, c := range cases {
		if _, got := r.check(c.m); got != c.want {
			t.Errorf("%s: refused for %q, want %q", c.name, got, c.want)
		}
	}

	now := time.Unix(1000, 0)
	if got := r.spend(ResendBurst, now); got != "" {
		t.Fatalf("a full burst refused: %q", got)
	}
	if got := r.spend(1, now); got != ResendLimited {
		t.Fatalf("a request past the burst: %q, want %q", got, ResendLimited)
	}
	if got := r.spend(ResendRate/2, now.Add(time.Second)); got != "" {
		t.Fatalf("half a second's budget after a second refused: %q", got)
	}
	if got := r.spend(ResendRate, now.Add(time.Second)); got != ResendLimited {
		t.Fatalf("more than the refill: %q, want %q", got, ResendLimited)
	}
}

// TestGateIgnoresResentCopies: a standby observing a copy published again
// (an older position than the last observed) keeps its observed position
// and its kept messages, and counts nothing as ahead.
func TestGateIgnoresResentCopies(t *testing.T) {
	g, err := NewGate(func(string, stream.Pos, []byte) error { return nil }, func() bool { return false }, 16)
	if err != nil {
		t.Fatal(err)
	}
	at := func(b int64) stream.Pos { return stream.Pos{Epoch: 1, Bin: b} }
	for b := int64(1); b <= 10; b++ {
		if err := g.Publish("s", at(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	g.Observe(at(6))
	before := g.Stats()
	for b := int64(2); b <= 6; b++ {
		g.Observe(at(b)) // the holder's copies, published again for a device
		if !g.Plausible(at(b)) {
			t.Errorf("copy at bin %d implausible", b)
		}
	}
	if p, _ := g.Observed(); p != at(6) {
		t.Errorf("observed %v after the copies, want %v", p, at(6))
	}
	if s := g.Stats(); s != before {
		t.Errorf("stats %+v after the copies, want %+v", s, before)
	}
	g.Observe(at(8))
	if s := g.Stats(); s.Matched != before.Matched+2 {
		t.Errorf("matched %d after bin 8, want %d: the kept messages 7 and 8", s.Matched, before.Matched+2)
	}
}
