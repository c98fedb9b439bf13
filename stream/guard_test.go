package stream

import (
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestGuardGroupAnnouncements: with a group key, a control message
// carrying GroupHeader is admitted under that key only, once, with a
// sending time of its own; the device's messages stay under its Up key;
// frames never pass under the group key; without it, announcements fail.
func TestGuardGroupAnnouncements(t *testing.T) {
	k := testKeys(1, 2)
	up, _ := NewAuth(k.Up)
	group, _ := NewAuth(testKeys(5, 6).Up)
	var devStamp, groupStamp int64
	device := func(subject string) *nats.Msg {
		m := &nats.Msg{Subject: subject, Data: []byte("ctl")}
		stampTime(m, &devStamp)
		up.Sign(m)
		return m
	}
	announce := func(signer *Auth) *nats.Msg {
		m := &nats.Msg{Subject: ControlSubject("dev0"), Data: []byte("reset at"), Header: nats.Header{GroupHeader: {"g.0.1"}}}
		SignAnnouncement(signer, m, &groupStamp)
		return m
	}
	a1 := announce(group)
	// Sent after a1, stamped before the device's next control message (the
	// group's clock may lag the device's): each keeps its own order.
	a2 := &nats.Msg{Subject: a1.Subject, Data: a1.Data, Header: nats.Header{GroupHeader: a1.Header[GroupHeader]}}
	t1, _ := SentAt(a1)
	a2.Header.Set(TimeHeader, strconv.FormatInt(t1+1, 10))
	group.Sign(a2)
	stripped := &nats.Msg{Subject: a2.Subject, Data: a2.Data, Header: nats.Header{AuthHeader: a2.Header[AuthHeader], TimeHeader: a2.Header[TimeHeader]}}
	frames := announce(group)
	frames.Subject = StimSubject("dev0")
	frames.Header.Del(TimeHeader)
	group.Sign(frames)

	g := NewGuard(up).WithGroup(group)
	plain := NewGuard(up)
	for _, c := range []struct {
		name    string
		g       *Guard
		m       *nats.Msg
		control bool
		want    string
	}{
		{"device control", g, device(ControlSubject("dev0")), true, ""},
		{"group announcement", g, a1, true, ""},
		{"the announcement again", g, a1, true, ReasonReplayed},
		{"device control after it", g, device(ControlSubject("dev0")), true, ""},
		{"an announcement from a lagging clock", g, a2, true, ""},
		{"an announcement under the device's key", g, announce(up), true, ReasonAuthInvalid},
		{"an announcement without its group header", g, stripped, true, ReasonAuthInvalid},
		{"frames under the group key", g, frames, false, ReasonAuthInvalid},
		{"an announcement without the group key", plain, announce(group), true, ReasonAuthInvalid},
	} {
		if got := c.g.Admit(c.m, c.control); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSignAllocs: signing a reused message allocates the tag's text only.
func TestSignAllocs(t *testing.T) {
	a, _ := NewAuth(testKeys(1, 2).Down)
	m := &nats.Msg{Subject: SpikesSubject("dev0"), Data: make([]byte, 2648), Header: nats.Header{PosHeader: {"1.2.0"}}}
	a.Sign(m)
	if n := testing.AllocsPerRun(100, func() { a.Sign(m) }); n > 1 {
		t.Fatalf("%v allocations per signature, want at most 1", n)
	}
	if err := a.Check(m); err != nil {
		t.Fatal(err)
	}
}
