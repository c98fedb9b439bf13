package standby

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// hmacAuth is a test Authenticator: HMAC-SHA256 with a shared key.
type hmacAuth []byte

func (k hmacAuth) Sign(data []byte) ([]byte, error) {
	m := hmac.New(sha256.New, k)
	m.Write(data)
	return m.Sum(nil), nil
}

func (k hmacAuth) Verify(data, sig []byte) error {
	want, _ := k.Sign(data)
	if !hmac.Equal(want, sig) {
		return errors.New("bad signature")
	}
	return nil
}

// TestLedger: values at the same mark are compared once both sides have
// one, in either order; a repeat keeps the first; a side holds at most
// ledgerLen marks.
func TestLedger(t *testing.T) {
	type step struct {
		k                 mark
		v                 string
		holder            bool
		compared, isEqual bool
	}
	k1, k2 := mark{epoch: 1, bin: 4095, digest: true}, mark{epoch: 1, bin: stream.EventBin}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"own first, equal", []step{{k1, "a", false, false, false}, {k1, "a", true, true, true}}},
		{"holder first, differs", []step{{k1, "a", true, false, false}, {k1, "b", false, true, false}}},
		{"marks apart", []step{{k1, "a", true, false, false}, {k2, "b", false, false, false}, {k2, "b", true, true, true}, {k1, "a", false, true, true}}},
		{"a repeat keeps the first", []step{{k1, "a", true, false, false}, {k1, "b", true, false, false}, {k1, "a", false, true, true}}},
		{"compared once", []step{{k1, "a", true, false, false}, {k1, "a", false, true, true}, {k1, "a", false, false, false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l ledger
			for i, s := range c.steps {
				compared, equal := l.record(s.k, []byte(s.v), s.holder)
				if compared != s.compared || equal != s.isEqual {
					t.Fatalf("step %d: compared %v, equal %v; want %v, %v", i, compared, equal, s.compared, s.isEqual)
				}
			}
		})
	}
	var l ledger
	for i := range ledgerLen + 5 {
		l.record(mark{epoch: 1, bin: int64(i)}, []byte{1}, true)
	}
	if len(l.holder) != ledgerLen || l.holder[0].k.bin != 5 {
		t.Fatalf("%d marks kept, the oldest at %d; want %d from 5", len(l.holder), l.holder[0].k.bin, ledgerLen)
	}
}

// TestCheckAnswer: a state answer is taken only from the lease entry's
// incarnation, at a revision the entry has reached, and with an
// authenticator only with the holder's signature.
func TestCheckAnswer(t *testing.T) {
	key, other := hmacAuth("k"), hmacAuth("other")
	state := []byte(`{"started":false}`)
	entry := LeaseEntry{Holder: "a", Incarnation: "inc-a"}
	const inbox = "_INBOX.this"
	answer := func(inc, rev string, signer Authenticator) *nats.Msg {
		m := &nats.Msg{Subject: inbox, Data: state, Header: nats.Header{}}
		if inc != "" {
			m.Header.Set(IncarnationHeader, inc)
		}
		m.Header.Set(stream.LeaseHeader, rev)
		if signer != nil {
			sig, _ := signer.Sign(signedText(state, inc, 7, inbox))
			m.Header.Set(AuthHeader, base64.StdEncoding.EncodeToString(sig))
		}
		return m
	}
	replayed := answer("inc-a", "7", key)
	replayed.Subject = "_INBOX.other"
	for _, c := range []struct {
		name    string
		m       *nats.Msg
		auth    Authenticator
		wantErr string
	}{
		{"the holder's", answer("inc-a", "7", nil), nil, ""},
		{"not holding", answer("", "7", nil), nil, "not holding"},
		{"another incarnation", answer("inc-x", "7", nil), nil, "incarnation"},
		{"a revision the entry has not reached", answer("inc-a", "9", nil), nil, "revision"},
		{"no revision", answer("inc-a", "", nil), nil, "revision"},
		{"signed by the holder", answer("inc-a", "7", key), key, ""},
		{"unsigned with an authenticator", answer("inc-a", "7", nil), key, "signature"},
		{"signed with another key", answer("inc-a", "7", other), key, "signature"},
		{"the holder's answer to another request", replayed, key, "signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkAnswer(c.m, entry, 8, c.auth)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("checkAnswer: %v, want %q", err, c.wantErr)
			}
		})
	}
}

// TestLeaseForeignEntry: an entry no instance wrote (not an entry, no
// incarnation, or without the group's signature) is refused as a holder,
// alarmed and taken over at once; a signed entry of another instance is
// respected.
func TestLeaseForeignEntry(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	_, kv := bucket(t, s, testTTL)
	key := hmacAuth("k")
	signedOther := func() []byte {
		e := LeaseEntry{Holder: "x", Incarnation: "inc-x"}
		b, _ := e.signed()
		e.Sig, _ = key.Sign(b)
		v, _ := json.Marshal(e)
		return v
	}
	for i, c := range []struct {
		name    string
		value   []byte
		auth    Authenticator
		foreign bool
	}{
		{"garbage", []byte("not json"), nil, true},
		{"no incarnation", []byte(`{"holder":"x"}`), nil, true},
		{"unsigned with an authenticator", []byte(`{"holder":"x","incarnation":"inc-x"}`), key, true},
		{"another instance's, unsigned, no authenticator", []byte(`{"holder":"x","incarnation":"inc-x"}`), nil, false},
		{"another instance's, signed", signedOther(), key, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			k := "g" + string(rune('a'+i))
			if _, err := kv.Put(ctx, k, c.value); err != nil {
				t.Fatal(err)
			}
			var alarms []error
			l := lease(t, kv, "a", LeaseConfig{Key: k, Auth: c.auth, OnForeign: func(err error) { alarms = append(alarms, err) }})
			ok, err := l.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.foreign || (len(alarms) == 1) != c.foreign || (l.Status().Foreign == 1) != c.foreign {
				t.Fatalf("acquired %v, alarms %v, foreign %d; want a refusal %v", ok, alarms, l.Status().Foreign, c.foreign)
			}
			if c.foreign {
				e, err := kv.Get(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := checkEntry(e.Value(), c.auth); err != nil {
					t.Fatalf("the entry after the takeover: %v", err)
				}
			}
		})
	}
}
