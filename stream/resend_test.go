package stream

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestResendWire(t *testing.T) {
	r := Resend{First: 1 << 40, Count: MaxResendFrames}
	b, err := AppendResend(nil, &r)
	if err != nil || len(b) != ResendLen {
		t.Fatalf("encode: %d bytes, %v", len(b), err)
	}
	var got Resend
	if err := DecodeResend(b, &got); err != nil || got != r {
		t.Fatalf("decode: %+v, %v, want %+v", got, err, r)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	for _, tc := range []struct {
		name   string
		b      []byte
		reason string
	}{
		{"truncated", b[:ResendLen-1], ReasonTruncated},
		{"long", append(append([]byte(nil), b...), 0), ReasonOversized},
		{"version", mod(func(b []byte) []byte { b[0] = 2; return b }), ReasonVersion},
		{"type", mod(func(b []byte) []byte { b[1] = TypeFrames; return b }), ReasonType},
		{"record count", mod(func(b []byte) []byte { b[2] = 1; return b }), ReasonRange},
		{"no frames", mod(func(b []byte) []byte { b[4], b[5] = 0, 0; return b }), ReasonRange},
		{"too many frames", mod(func(b []byte) []byte { b[5] = 4; b[4] = 1; return b }), ReasonRange},
		{"seq past MaxSeq", mod(func(b []byte) []byte { b[15] = 0x40; return b }), ReasonRange},
		{"negative seq", mod(func(b []byte) []byte { b[15] = 0x80; return b }), ReasonRange},
	} {
		if err := DecodeResend(tc.b, &got); Reason(err) != tc.reason {
			t.Errorf("%s: %v, want reason %s", tc.name, err, tc.reason)
		}
	}
	for _, bad := range []Resend{{First: 0, Count: 0}, {First: -1, Count: 1}, {First: 0, Count: MaxResendFrames + 1}} {
		if _, err := AppendResend(nil, &bad); err == nil {
			t.Errorf("%+v encoded", bad)
		}
	}
}

// TestServeResend: a publisher serving resend requests answers with the
// requested frames it keeps (the last ResendRingFrames), an empty payload
// when it keeps none; with keys it answers only authentic requests and
// signs its answers.
func TestServeResend(t *testing.T) {
	nc, _ := testConn(t)
	k := testKeys(5, 6)
	p, _ := NewPublisher(nc, "devR")
	if err := p.UseKeys(k); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request(ResendSubject("devR"), nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request before ServeResend: %v, want no responders", err)
	}
	if err := p.ServeResend(); err != nil {
		t.Fatal(err)
	}
	if err := p.ServeResend(); err != nil {
		t.Fatalf("ServeResend again: %v", err)
	}
	const sent = ResendRingFrames/10*10 + 1000 // messages of 10 frames; the ring full, its oldest frames overwritten
	for s := int64(0); s < sent; s += 10 {
		f := &Frames{FirstSeq: s, Frames: make([]Frame, 10)}
		for i := range f.Frames {
			f.Frames[i].Time = s + int64(i)
		}
		if err := p.PublishFrames(f); err != nil {
			t.Fatal(err)
		}
	}
	down, _ := NewAuth(k.Down)
	up, _ := NewAuth(k.Up)
	ask := func(r Resend, sign bool) (*nats.Msg, error) {
		b, err := AppendResend(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: ResendSubject("devR"), Data: b, Header: nats.Header{}}
		if sign {
			down.Sign(m)
		}
		return nc.RequestMsg(m, time.Second)
	}
	oldest := int64(sent - ResendRingFrames)
	for _, tc := range []struct {
		name        string
		r           Resend
		first, last int64 // the frames answered; first > last: none
	}{
		{"kept", Resend{First: sent - 1000, Count: 20}, sent - 1000, sent - 981},
		{"older than the ring", Resend{First: 10, Count: 20}, 1, 0},
		{"partly older", Resend{First: oldest - 5, Count: 20}, oldest, oldest + 14},
		{"partly not sent", Resend{First: sent - 4, Count: 20}, sent - 4, sent - 1},
	} {
		m, err := ask(tc.r, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := up.Check(m); err != nil {
			t.Fatalf("%s: answer not signed with the Up key: %v", tc.name, err)
		}
		if tc.first > tc.last {
			if len(m.Data) != 0 {
				t.Errorf("%s: answer of %d bytes, want empty", tc.name, len(m.Data))
			}
			continue
		}
		var f Frames
		if err := DecodeFrames(m.Data, &f); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f.FirstSeq != tc.first || f.LastSeq() != tc.last {
			t.Errorf("%s: frames %d..%d, want %d..%d", tc.name, f.FirstSeq, f.LastSeq(), tc.first, tc.last)
		}
		for i, fr := range f.Frames {
			if fr.Time != f.FirstSeq+int64(i) {
				t.Fatalf("%s: frame %d has time %d", tc.name, f.FirstSeq+int64(i), fr.Time)
			}
		}
	}
	if _, err := ask(Resend{First: sent - 1000, Count: 20}, false); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("unsigned request: %v, want no answer", err)
	}
	if st := p.ResendServed(); st != (ResendServed{Answered: 3, Frames: 20 + 15 + 4, None: 1, Refused: 1}) {
		t.Fatalf("counters %+v", st)
	}
}

// TestServeResendRateLimited: a flood of requests is answered at most
// resendAnswersPerSecond times a second; the rest are counted.
func TestServeResendRateLimited(t *testing.T) {
	nc, _ := testConn(t)
	p, _ := NewPublisher(nc, "devF")
	if err := p.ServeResend(); err != nil {
		t.Fatal(err)
	}
	b, _ := AppendResend(nil, &Resend{First: 0, Count: 1})
	inbox := nats.NewInbox()
	got, _ := nc.SubscribeSync(inbox)
	const n = 3 * resendAnswersPerSecond
	for range n {
		if err := nc.PublishRequest(ResendSubject("devF"), inbox, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.ResendServed().None+p.ResendServed().Refused < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st := p.ResendServed()
	if st.None < resendAnswersPerSecond || st.None > 2*resendAnswersPerSecond || st.None+st.Refused != n {
		t.Fatalf("%d requests: %+v, want at most %d a second answered, the rest refused", n, st, resendAnswersPerSecond)
	}
	if m, _, _ := got.Pending(); uint64(m) > st.None {
		t.Fatalf("%d answers received, %d sent", m, st.None)
	}
}

// TestResendAnswerRange: a resend answer's reply subject names the
// frames it may carry; anything else names none.
func TestResendAnswerRange(t *testing.T) {
	for _, tc := range []struct {
		subject string
		first   int64
		count   int
		ok      bool
	}{
		{"_INBOX.abc.def.2100.800", 2100, 800, true},
		{ResendReply("_INBOX.abc.", 2100, 800), 2100, 800, true},
		{"_INBOX.x.0.1", 0, 1, true},
		{"_INBOX.x.5.0", 0, 0, false},
		{"_INBOX.x.5.1025", 0, 0, false},
		{"_INBOX.x.-1.8", 0, 0, false},
		{"rgc.dev0.stim", 0, 0, false},
		{"8", 0, 0, false},
		{"", 0, 0, false},
	} {
		first, count, ok := ResendAnswerRange(tc.subject)
		if first != tc.first || count != tc.count || ok != tc.ok {
			t.Errorf("%q: %d, %d, %v; want %d, %d, %v", tc.subject, first, count, ok, tc.first, tc.count, tc.ok)
		}
	}
}
