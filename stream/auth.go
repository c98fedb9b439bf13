package stream

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
)

// Headers of authenticated messages (docs/protocol.md, "Authentication").
const (
	// AuthHeader carries a message's authenticator (msgauth.TagLen
	// characters).
	AuthHeader = "Rgc-Auth"
	// TimeHeader carries the sender's wall clock (Unix ns) when it sent a
	// frames or control message; the daemon refuses a control message not
	// later than the last one it accepted from the device (a replay).
	TimeHeader = "Rgc-Time"
)

// SignedHeaders are the headers an authenticator covers besides the
// subject and the payload, in order: every header that steers a receiver.
// An absent header counts as empty.
var SignedHeaders = []string{TimeHeader, PosHeader, GroupHeader, LeaseHeader}

// Reasons of refused authenticated messages (metric labels, like the
// decode Reason constants).
const (
	ReasonAuthMissing = "auth_missing"
	ReasonAuthInvalid = "auth_invalid"
	ReasonReplayed    = "replayed"
)

// ErrAuthMissing and ErrAuthInvalid are Auth.Check's errors.
var (
	ErrAuthMissing = errors.New(ReasonAuthMissing + ": message without an authenticator")
	ErrAuthInvalid = errors.New(ReasonAuthInvalid + ": authenticator does not match the message")
)

// Auth signs and checks the messages of one device in one direction with
// its key (msgauth.DeviceKeys: Up for what the device sends, Down for what
// its daemon group sends). It is safe for concurrent use.
type Auth struct {
	mu     sync.Mutex
	mac    *msgauth.MAC
	fields []string
	tag    [msgauth.TagLen]byte
}

// NewAuth returns an Auth with key (msgauth.KeyLen bytes).
func NewAuth(key []byte) (*Auth, error) {
	m, err := msgauth.New(key)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	return &Auth{mac: m, fields: make([]string, len(SignedHeaders))}, nil
}

func (a *Auth) fill(h nats.Header) {
	for i, k := range SignedHeaders {
		a.fields[i] = ""
		if v := h[k]; len(v) > 0 {
			a.fields[i] = v[0]
		}
	}
}

// Sign sets m's AuthHeader (creating its header if needed) over its
// subject, SignedHeaders and payload. A message reused from one publish
// to the next keeps its header's value slice: one allocation per message
// (the tag's text).
func (a *Auth) Sign(m *nats.Msg) {
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	a.mu.Lock()
	a.fill(m.Header)
	tag := string(a.mac.Tag(m.Subject, a.fields, m.Data))
	a.mu.Unlock()
	if v := m.Header[AuthHeader]; len(v) == 1 {
		v[0] = tag
		return
	}
	m.Header[AuthHeader] = []string{tag}
}

// Check reports whether m carries a valid authenticator: nil, or
// ErrAuthMissing or ErrAuthInvalid.
func (a *Auth) Check(m *nats.Msg) error {
	v := m.Header[AuthHeader]
	if len(v) == 0 {
		return ErrAuthMissing
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fill(m.Header)
	if !a.mac.Verify(v[0], m.Subject, a.fields, m.Data) {
		return ErrAuthInvalid
	}
	return nil
}

// SentAt returns the TimeHeader of m (Unix ns), false if absent or not a
// number.
func SentAt(m *nats.Msg) (int64, bool) {
	v := m.Header[TimeHeader]
	if len(v) == 0 {
		return 0, false
	}
	t, err := strconv.ParseInt(v[0], 10, 64)
	return t, err == nil
}

// stampTime sets m's TimeHeader to now, later than any stamp before it
// from the same clock.
func stampTime(m *nats.Msg, last *int64) {
	now := time.Now().UnixNano()
	if now <= *last {
		now = *last + 1
	}
	*last = now
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	m.Header[TimeHeader] = []string{strconv.FormatInt(now, 10)}
}

// Guard applies the authentication rules to the messages a device sends
// (frames and control): a valid authenticator under its Up key, and a
// control message sent later than the last one admitted. A hot-standby
// group's announcement on the control subject (a reset at a frame, sent
// by the lease holder) carries GroupHeader and is checked under the
// group's key instead (WithGroup), with a sending time of its own. The
// daemon and the flight recorder's audit both use it, so they refuse the
// same messages. It is for one goroutine.
type Guard struct {
	up, group          *Auth
	ctlTime, groupTime int64
}

// NewGuard returns a Guard checking with up (nil: every message passes).
func NewGuard(up *Auth) *Guard { return &Guard{up: up} }

// WithGroup makes g check control messages carrying GroupHeader under
// group, a standby group's key (nil: they are checked under the Up key,
// and fail), and returns g.
func (g *Guard) WithGroup(group *Auth) *Guard {
	g.group = group
	return g
}

// Admit returns the reason m (a frames message, or a control message when
// control is set) is refused, "" when it is admitted.
func (g *Guard) Admit(m *nats.Msg, control bool) string {
	if g == nil || g.up == nil {
		return ""
	}
	key, last := g.up, &g.ctlTime
	if control && g.group != nil && len(m.Header[GroupHeader]) > 0 {
		key, last = g.group, &g.groupTime
	}
	if err := key.Check(m); err != nil {
		if errors.Is(err, ErrAuthMissing) {
			return ReasonAuthMissing
		}
		return ReasonAuthInvalid
	}
	if control {
		t, ok := SentAt(m)
		if !ok || t <= *last {
			return ReasonReplayed
		}
		*last = t
	}
	return ""
}

// SignAnnouncement stamps m (a standby group's control message, carrying
// GroupHeader) with the sending time and signs it with group, the
// group's key, for Guard.WithGroup. last is the sender's previous stamp.
func SignAnnouncement(group *Auth, m *nats.Msg, last *int64) {
	stampTime(m, last)
	group.Sign(m)
}
