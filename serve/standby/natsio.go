package standby

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"rgcpred/stream"
)

// ErrNotConnected is returned by a NATSPublisher while its connection is
// down: a gated message is never left in the client's reconnect buffer,
// which could release it after a successor took over; the gate keeps it
// instead, and sends it once the connection is back while this instance
// still holds the lease.
var ErrNotConnected = errors.New("standby: not connected: message kept by the gate, not buffered by the client")

// Scope returns the GroupHeader value of a group's shard: replicas observe
// only messages of their own scope.
func Scope(group string, shard, shards int) string {
	return group + "." + strconv.Itoa(shard) + "." + strconv.Itoa(shards)
}

// NATSPublisher returns a Publisher that publishes on nc with the position
// in stream.PosHeader, scope in stream.GroupHeader and the lease revision
// (revision(), typically Lease.Revision) in stream.LeaseHeader. It is for
// one goroutine at a time (the gate serialises it) and reuses its message
// and header buffers. While nc is not connected it returns
// ErrNotConnected.
func NATSPublisher(nc *nats.Conn, scope string, revision func() uint64) Publisher {
	return SignedNATSPublisher(nc, scope, revision, nil)
}

// SignedNATSPublisher is NATSPublisher that also signs each message with
// auth (the device's Down key), over its payload and the headers above
// (stream.SignedHeaders), as a daemon outside a group does; nil: unsigned.
func SignedNATSPublisher(nc *nats.Conn, scope string, revision func() uint64, auth *stream.Auth) Publisher {
	send := natsSender(nc, scope, auth)
	return func(subject string, pos stream.Pos, data []byte) error { return send(subject, pos, revision(), data) }
}

// natsSender returns SignedNATSPublisher's sender with the lease revision
// given per message (Echo.Publish: a copy goes out with the original's).
func natsSender(nc *nats.Conn, scope string, auth *stream.Auth) func(subject string, pos stream.Pos, rev uint64, data []byte) error {
	m := &nats.Msg{Header: nats.Header{stream.GroupHeader: {scope}}}
	var buf []byte
	var last uint64 // the revision revText holds
	revText := []string{"0"}
	m.Header[stream.LeaseHeader] = revText
	return func(subject string, pos stream.Pos, rev uint64, data []byte) error {
		buf = pos.AppendText(buf[:0])
		if rev != last {
			last = rev
			revText[0] = strconv.FormatUint(rev, 10)
		}
		m.Subject, m.Data = subject, data
		m.Header.Set(stream.PosHeader, string(buf))
		if auth != nil {
			auth.Sign(m)
		}
		if !nc.IsConnected() {
			return fmt.Errorf("%w: publish %s at %s", ErrNotConnected, subject, buf)
		}
		if err := nc.PublishMsg(m); err != nil {
			return fmt.Errorf("standby: publish %s at %s: %w", subject, buf, err)
		}
		return nil
	}
}

// ObserveNATS subscribes to subjects on nc and tells g the position of every
// message of scope carrying stream.PosHeader (messages of another scope, or of
// none, are counted in GateStats.Foreign; messages without a position are
// ignored; malformed ones go to onErr, which may be nil). Unsubscribe the
// returned subscriptions to stop.
func ObserveNATS(nc *nats.Conn, g *Gate, scope string, onErr func(error), subjects ...string) ([]*nats.Subscription, error) {
	return observeNATS(nc, g, scope, nil, onErr, nil, subjects...)
}

// observeNATS is ObserveNATS that, with auth (the device's Down key),
// ignores a message without its valid authenticator (counted in
// GateStats.AuthMissing and AuthInvalid: a forged position), and hands
// every message of scope with its position to seen (nil: none).
func observeNATS(nc *nats.Conn, g *Gate, scope string, auth *stream.Auth, onErr func(error), seen func(*nats.Msg, stream.Pos),
	subjects ...string) ([]*nats.Subscription, error) {
	subs := make([]*nats.Subscription, 0, len(subjects))
	cb := func(m *nats.Msg) {
		v := m.Header.Get(stream.PosHeader)
		if v == "" {
			return
		}
		if auth != nil {
			if err := auth.Check(m); err != nil {
				g.countUnauthentic(errors.Is(err, stream.ErrAuthMissing))
				return
			}
		}
		if m.Header.Get(stream.GroupHeader) != scope {
			g.countForeign()
			return
		}
		p, err := stream.ParsePos(v)
		if err != nil {
			if onErr != nil {
				onErr(fmt.Errorf("standby: message on %s: %w", m.Subject, err))
			}
			return
		}
		g.Observe(p)
		if seen != nil {
			seen(m, p)
		}
	}
	for _, s := range subjects {
		sub, err := nc.Subscribe(s, cb)
		if err != nil {
			for _, o := range subs {
				_ = o.Unsubscribe()
			}
			return nil, fmt.Errorf("standby: observe %s: %w", s, err)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}
