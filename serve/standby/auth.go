package standby

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
	"rgcpred/stream"
)

// Authenticator signs what a group's instances tell each other (lease
// values, states, digests) and verifies what they receive, so that a
// party without its key cannot pass as an instance. Without one (nil),
// nothing is signed and only the form of a value and the lease holder's
// incarnation are checked.
type Authenticator interface {
	// Sign returns data's signature.
	Sign(data []byte) ([]byte, error)
	// Verify returns an error unless sig is data's signature.
	Verify(data, sig []byte) error
}

// keyAuth is the Authenticator of a group's key (msgauth.KeyFile.Groups):
// an HMAC-SHA256 (msgauth.MAC) over the data, bound to the group's name
// so that a signature of one group never passes in another.
type keyAuth struct {
	mu     sync.Mutex
	mac    *msgauth.MAC
	domain string
}

// errBadSignature is keyAuth.Verify's error.
var errBadSignature = errors.New("signature does not match (a party without the group's key?)")

// NewKeyAuth returns the Authenticator of group with its key
// (msgauth.KeyLen bytes, from the key file's "<group> standby" line). It
// is safe for concurrent use.
func NewKeyAuth(group string, key []byte) (Authenticator, error) {
	m, err := msgauth.New(key)
	if err != nil {
		return nil, fmt.Errorf("standby: key of group %s: %w", group, err)
	}
	return &keyAuth{mac: m, domain: "rgcpred.standby." + group}, nil
}

// Sign returns data's signature.
func (a *keyAuth) Sign(data []byte) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]byte(nil), a.mac.Tag(a.domain, nil, data)...), nil
}

// Verify returns an error unless sig is data's signature.
func (a *keyAuth) Verify(data, sig []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.mac.Verify(string(sig), a.domain, nil, data) {
		return errBadSignature
	}
	return nil
}

// Headers of a state answer: the answering instance's lease incarnation
// while it holds the lease (absent otherwise; its revision goes in
// stream.LeaseHeader), and the signature over the state and both (with an
// Authenticator).
const (
	IncarnationHeader = "Rgc-Incarnation"
	AuthHeader        = "Rgc-Auth"
)

// signedText is what a state answer's signature covers: the request's
// reply subject too (a fresh inbox per request), so that an answer
// recorded from an earlier request (an older state) is refused when
// replayed to a later one.
func signedText(data []byte, inc string, rev uint64, inbox string) []byte {
	b := make([]byte, 0, len(data)+len(inc)+len(inbox)+24)
	b = append(b, inbox...)
	b = append(b, '\n')
	b = append(b, inc...)
	b = append(b, '\n')
	b = strconv.AppendUint(b, rev, 10)
	b = append(b, '\n')
	return append(b, data...)
}

// stateAnswer builds the answer to a state request whose reply subject is
// inbox: the holder's carries its incarnation, revision and (with auth)
// signature.
func stateAnswer(data []byte, l *Lease, auth Authenticator, inbox string) (*nats.Msg, error) {
	m := &nats.Msg{Subject: inbox, Data: data, Header: nats.Header{}}
	if !l.Held() {
		return m, nil
	}
	rev := l.Revision()
	m.Header.Set(IncarnationHeader, l.Incarnation())
	m.Header.Set(stream.LeaseHeader, strconv.FormatUint(rev, 10))
	if auth != nil {
		sig, err := auth.Sign(signedText(data, l.Incarnation(), rev, inbox))
		if err != nil {
			return nil, fmt.Errorf("standby: sign the state: %w", err)
		}
		m.Header.Set(AuthHeader, base64.StdEncoding.EncodeToString(sig))
	}
	return m, nil
}

// checkAnswer reports whether a state answer, received on the requester's
// inbox, comes from the holder of the lease entry e (its incarnation, a
// revision it wrote, its signature for this request).
func checkAnswer(m *nats.Msg, e LeaseEntry, entryRev uint64, auth Authenticator) error {
	inc := m.Header.Get(IncarnationHeader)
	if inc == "" {
		return fmt.Errorf("answer from an instance not holding the lease")
	}
	if inc != e.Incarnation {
		return fmt.Errorf("answer from incarnation %q, the lease is held by %s (incarnation %q)", inc, e.Holder, e.Incarnation)
	}
	rev, err := strconv.ParseUint(m.Header.Get(stream.LeaseHeader), 10, 64)
	if err != nil || rev == 0 || rev > entryRev {
		return fmt.Errorf("answer at lease revision %q, the entry is at %d", m.Header.Get(stream.LeaseHeader), entryRev)
	}
	if auth != nil {
		sig, err := base64.StdEncoding.DecodeString(m.Header.Get(AuthHeader))
		if err == nil {
			err = auth.Verify(signedText(m.Data, inc, rev, m.Subject), sig)
		}
		if err != nil {
			return fmt.Errorf("answer's signature: %w", err)
		}
	}
	return nil
}
