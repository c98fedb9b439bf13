package standby

import (
	"errors"
	"fmt"

	"rgcpred/stream"
)

// EchoKeepBytes bounds the payload bytes a holder's gate keeps awaiting
// their echo (Echo.KeepBytes in a group).
const EchoKeepBytes = 16 << 20

// Echo makes a holder's gate keep each message it published until the
// message comes back from the server, and publish again after a
// reconnect those that never came back (Gate, SetEcho).
type Echo struct {
	// Keep and KeepBytes bound the messages awaiting their echo (count,
	// payload bytes); beyond, the oldest are dropped and counted
	// (GateStats.EchoOverflow).
	Keep, KeepBytes int
	// Revision returns the lease revision a message goes out with; its
	// copy goes out with the same one.
	Revision func() uint64
	// Publish sends one message at pos with lease revision rev (the same
	// headers and authenticator for a copy as for the original); it
	// returns ErrNotConnected while the connection is down. With echo on,
	// the gate publishes through it instead of its Publisher.
	Publish func(subject string, pos stream.Pos, rev uint64, data []byte) error
	// Generation returns the connection's reconnect count
	// (nats.Conn.Stats().Reconnects): once it changed, what was published
	// before and never came back was lost with the old connection.
	Generation func() uint64
}

// SetEcho turns the echo ring on (see Gate). Call it before the first
// Publish.
func (g *Gate) SetEcho(e Echo) error {
	if e.Keep <= 0 || e.KeepBytes <= 0 {
		return fmt.Errorf("standby: echo ring of %d messages and %d bytes: not positive", e.Keep, e.KeepBytes)
	}
	if e.Revision == nil || e.Publish == nil || e.Generation == nil {
		return errors.New("standby: echo without a revision, a publisher or a reconnect count")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.echo, g.echoOn = e, true
	g.sent = newHeldRing(e.Keep)
	g.gen = e.Generation()
	return nil
}

// awaitEcho keeps a copy of a published message until its echo comes,
// dropping the oldest beyond the bounds; g.mu is held.
func (g *Gate) awaitEcho(subject string, pos stream.Pos, rev uint64, data []byte) {
	if len(data) > g.echo.KeepBytes {
		g.stats.EchoOverflow++
		return
	}
	for g.sent.full() || g.sent.bytes+len(data) > g.echo.KeepBytes {
		g.sent.pop()
		g.stats.EchoOverflow++
	}
	g.sent.push(subject, pos, rev, data)
}

// republish publishes again, once the connection reconnected since the
// last pass, every message whose echo never came, oldest first, with its
// original revision. It stops at a message refused with ErrNotConnected
// (the next call starts the pass again); other errors are returned after
// trying every message. The messages stay until their echo comes: the
// new connection may die with them too. g.mu is held.
func (g *Gate) republish() error {
	if !g.echoOn {
		return nil
	}
	gen := g.echo.Generation()
	if gen == g.gen {
		return nil
	}
	var first error
	for i := range g.sent.n {
		h := g.sent.at(i)
		err := g.echo.Publish(h.subject, h.pos, h.rev, h.data)
		if errors.Is(err, ErrNotConnected) {
			return fmt.Errorf("standby: publish unechoed messages again: %w", err)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("standby: publish an unechoed message again: %w", err)
			}
			continue
		}
		g.stats.Republished++
	}
	g.gen = gen
	return first
}
