package standby

import (
	"bytes"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

func randKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, msgauth.KeyLen)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyAuth: a group key's signature verifies under the same key and
// group only, and over the same data only.
func TestKeyAuth(t *testing.T) {
	key := randKey(t)
	a, err := NewKeyAuth("g", key)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"holder":"a","incarnation":"x"}`)
	sig, err := a.Sign(data)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := NewKeyAuth("g", key)
	otherGroup, _ := NewKeyAuth("h", key)
	otherKey, _ := NewKeyAuth("g", randKey(t))
	for _, c := range []struct {
		name string
		v    Authenticator
		data []byte
		sig  []byte
		ok   bool
	}{
		{"same key and group", same, data, sig, true},
		{"another group", otherGroup, data, sig, false},
		{"another key", otherKey, data, sig, false},
		{"changed data", same, append(bytes.Clone(data), ' '), sig, false},
		{"no signature", same, data, nil, false},
		{"truncated signature", same, data, sig[:len(sig)-1], false},
	} {
		if err := c.v.Verify(c.data, c.sig); (err == nil) != c.ok {
			t.Errorf("%s: verify %v, want ok %v", c.name, err, c.ok)
		}
	}
	if _, err := NewKeyAuth("g", key[:16]); err == nil {
		t.Error("a 16-byte key accepted")
	}
}

// TestSignedGate: a signed gate publisher's messages pass the device's
// check and carry no header outside stream.SignedHeaders; an observer with
// the device's Down key takes their positions and ignores forged ones
// (none, another key's, a changed position), counting them by reason.
func TestSignedGate(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	conn := func() *nats.Conn {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	obsConn, pubConn, devConn := conn(), conn(), conn()
	down, _ := stream.NewAuth(randKey(t))
	forger, _ := stream.NewAuth(randKey(t))
	subj := stream.SpikesSubject("dev0")
	scope := Scope("g", 0, 1)

	g, err := NewGate(NATSPublisher(obsConn, scope, func() uint64 { return 1 }), func() bool { return false }, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := observeNATS(obsConn, g, scope, down, nil, nil, subj); err != nil {
		t.Fatal(err)
	}
	dev, err := devConn.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{obsConn, devConn} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	pub := SignedNATSPublisher(pubConn, scope, func() uint64 { return 7 }, down)
	at := func(bin int64) stream.Pos { return stream.Pos{Epoch: 1, Bin: bin} }
	waitObserved := func(p stream.Pos) {
		t.Helper()
		deadline := time.Now().Add(waitLimit)
		for o, _ := g.Observed(); o != p; o, _ = g.Observed() {
			if time.Now().After(deadline) {
				t.Fatalf("observed %v, want %v", o, p)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	if err := pub(subj, at(1), []byte("d1")); err != nil {
		t.Fatal(err)
	}
	waitObserved(at(1))
	m, err := dev.NextMsg(waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Check(m); err != nil {
		t.Fatalf("the device refuses the gate's message: %v", err)
	}
	for k := range m.Header {
		if k != stream.AuthHeader && !slices.Contains(stream.SignedHeaders, k) {
			t.Errorf("header %s steers a receiver but is not signed", k)
		}
	}

	// Forged positions far ahead: unsigned, under another key, and a
	// signed message whose position was changed.
	far := at(1000).String()
	unsigned := &nats.Msg{Subject: subj, Data: []byte("x"), Header: nats.Header{stream.PosHeader: {far}, stream.GroupHeader: {scope}}}
	otherKey := &nats.Msg{Subject: subj, Data: []byte("x"), Header: nats.Header{stream.PosHeader: {far}, stream.GroupHeader: {scope}}}
	forger.Sign(otherKey)
	changed := &nats.Msg{Subject: subj, Data: m.Data, Header: nats.Header{}}
	for k, v := range m.Header {
		changed.Header[k] = slices.Clone(v)
	}
	changed.Header.Set(stream.PosHeader, far)
	for _, f := range []*nats.Msg{unsigned, otherKey, changed} {
		if err := pubConn.PublishMsg(f); err != nil {
			t.Fatal(err)
		}
	}
	// Had a forged position been believed, this one would not be.
	if err := pub(subj, at(2), []byte("d2")); err != nil {
		t.Fatal(err)
	}
	waitObserved(at(2))
	if st := g.Stats(); st.AuthMissing != 1 || st.AuthInvalid != 2 || st.Ahead != 0 {
		t.Errorf("gate stats %+v: want 1 missing and 2 invalid authenticators", st)
	}
}
