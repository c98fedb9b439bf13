package standby

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"rgcpred/stream"
)

// DefaultMaxAhead is the gate's default bound, in frames, on how far ahead
// of its own position a standby believes an observed position: about a
// second of frames, more than a synced standby trails its holder.
const DefaultMaxAhead = 1024

// Publisher sends one message with its position (e.g. a NATS publish with
// stream.PosHeader set).
type Publisher func(subject string, pos stream.Pos, data []byte) error

// GateStats counts what a gate did. Every field only grows.
type GateStats struct {
	// Published counts messages this instance published.
	Published uint64
	// Held counts messages kept back as a standby.
	Held uint64
	// Flushed counts kept messages published later: at a takeover (the
	// holder's copy was never observed), at a renewal after the holding
	// ran out, or once the connection is back after an outage.
	Flushed uint64
	// Overflow counts held messages dropped unpublished because the buffer
	// was full (a gap if this instance then takes over).
	Overflow uint64
	// Suppressed counts messages not published because a message at or
	// after their position had already been published or observed.
	Suppressed uint64
	// Matched counts kept messages dropped because the holder's copy (a
	// message at or after their position) was observed.
	Matched uint64
	// Discarded counts kept messages dropped at a takeover as at or before
	// the last position published; with the flush rules of Publish and
	// Gain it stays 0, and anything else is a lost message.
	Discarded uint64
	// Replaced counts kept messages, and published ones awaiting their
	// echo, dropped because this instance's state was replaced by the
	// holder's (Forget): they came from a state the group did not share.
	Replaced uint64
	// Ahead counts observed positions ignored as implausible: further
	// ahead of this instance's own position than MaxAhead frames or a
	// next epoch's event, or ahead of it at all while this instance
	// publishes (a forged header, or a standby trailing far behind).
	Ahead uint64
	// Foreign counts messages on the gated subjects observed from another
	// group or shard, or without one (ignored).
	Foreign uint64
	// AuthMissing and AuthInvalid count positioned messages observed
	// without a valid authenticator under the device's Down key
	// (GroupConfig.DeviceAuth): a forger's, ignored.
	AuthMissing, AuthInvalid uint64
	// Echoed counts published messages dropped from the echo ring (Echo)
	// because they, or a later position, came back from the server.
	Echoed uint64
	// Republished counts messages published again after a reconnect
	// because their echo never came (written into a connection that
	// died).
	Republished uint64
	// EchoOverflow counts published messages dropped from a full echo
	// ring before their echo came (lost if the connection then died with
	// them).
	EchoOverflow uint64
}

// Gate decides, message by message, whether this instance publishes: the
// holder does, a standby keeps the message until it observes the holder's
// copy (a message of the same or a later position on the gated subjects).
// When this instance takes over it publishes the kept messages past the
// last position observed, then every new one: no message twice, none lost,
// as long as the buffer holds the messages between the holder's last
// publish and the takeover. The holder keeps, the same way, the messages
// the connection refuses (ErrNotConnected) and those produced while its
// holding had lapsed, and publishes them first when it can again.
//
// An observed position counts only while it is plausible: at most
// MaxAhead frames ahead of this instance's own position (the last it
// produced) in the same epoch, or the next epoch's event; while this
// instance publishes, never ahead of its own. A takeover starts from the
// instance's own position at the latest. So a forged position never
// suppresses a holder's messages, and costs a standby at most MaxAhead
// frames of kept messages; a holder that trailed the old one re-sends
// what the old one sent past it, which the device drops (stream.Fence).
//
// Publish is called by the one goroutine producing the messages, in
// position order; Observe, Gain, Lose and Retry by any goroutine.
type Gate struct {
	pub  Publisher
	held func() bool

	mu       sync.Mutex
	active   bool       // this instance acts as holder
	observed stream.Pos // the last position seen published (by anyone)
	seen     bool
	own      stream.Pos // the last position this instance produced
	hasOwn   bool
	maxAhead int64
	ring     heldRing // kept: a standby's, refused or produced while not holding
	stats    GateStats

	echo   Echo
	echoOn bool
	sent   heldRing // published, awaiting their echo (with echo on)
	gen    uint64   // the connection generation the sent messages are known to be on

	// Position counter of the producing goroutine.
	cur stream.Pos
}

// NewGate returns a gate publishing through pub while holder() is true and
// Gain was called more recently than Lose; it keeps up to capacity messages
// as a standby.
func NewGate(pub Publisher, holder func() bool, capacity int) (*Gate, error) {
	if pub == nil || holder == nil {
		return nil, fmt.Errorf("standby: gate without a publisher or a holder test")
	}
	if capacity <= 0 {
		return nil, fmt.Errorf("standby: gate capacity %d not positive", capacity)
	}
	return &Gate{pub: pub, held: holder, ring: newHeldRing(capacity), maxAhead: DefaultMaxAhead,
		cur: stream.Pos{Bin: stream.EventBin, Index: -1}}, nil
}

// SetMaxAhead sets how many frames ahead of this instance's own position
// an observed position may be (default DefaultMaxAhead).
func (g *Gate) SetMaxAhead(frames int64) {
	g.mu.Lock()
	g.maxAhead = max(frames, 0)
	g.mu.Unlock()
}

// plausible reports whether an observed position p can be another
// instance's; g.mu is held.
func (g *Gate) plausible(p stream.Pos) bool {
	if !g.hasOwn || !g.own.Less(p) {
		return true // nothing produced yet (checked again at the first), or not ahead
	}
	if g.active && g.held() {
		return false // no other instance publishes past the holder
	}
	switch {
	case p.Epoch == g.own.Epoch:
		return g.own.Bin == stream.EventBin || g.own.Bin > math.MaxInt64-g.maxAhead || p.Bin <= g.own.Bin+g.maxAhead
	case p.Epoch-1 == g.own.Epoch:
		return p.Bin == stream.EventBin
	}
	return false
}

// Plausible reports whether an observed position p can be another
// instance's (see Gate): not implausibly far ahead of this instance's own.
func (g *Gate) Plausible(p stream.Pos) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.plausible(p)
}

// Next returns the position of the next message produced while processing
// bin of epoch (stream.EventBin for a stream event): index 0 for the first message
// of a bin, one more for each further message of the same bin.
func (g *Gate) Next(epoch uint32, bin int64) stream.Pos {
	if g.cur.Epoch == epoch && g.cur.Bin == bin {
		g.cur.Index++
	} else {
		g.cur = stream.Pos{Epoch: epoch, Bin: bin}
	}
	return g.cur
}

// ResetPos restarts the position counter of Next, for a producer whose
// state was replaced (a standby that restored the holder's state).
func (g *Gate) ResetPos() { g.cur = stream.Pos{Bin: stream.EventBin, Index: -1} }

// Forget drops the kept messages and this instance's own position, for
// a producer whose state was replaced (a standby that restored the
// holder's state): what it computed before came from another state, and
// a kept message of a stream the group never started (a restart only this
// instance saw) would otherwise go out at a takeover and make every
// later message look already published.
func (g *Gate) Forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stats.Replaced += uint64(g.ring.clear() + g.sent.clear())
	g.hasOwn = false
}

// Publish publishes data on subject at pos if this instance is the holder,
// or keeps a copy otherwise. It returns the publisher's error.
func (g *Gate) Publish(subject string, pos stream.Pos, data []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.own, g.hasOwn = pos, true
	if g.seen && !g.plausible(g.observed) {
		g.seen = false
		g.stats.Ahead++
	}
	if g.seen && !g.observed.Less(pos) {
		g.stats.Suppressed++
		return nil
	}
	if g.active && g.held() {
		// Messages lost in a connection that died, then kept messages (a
		// holding that lapsed and was renewed before Gain ran, or
		// publishes refused while the connection was down) go out first,
		// so sending pos does not make them look already published; while
		// the connection is still down pos waits behind them.
		rerr := g.republish()
		err := rerr
		if !errors.Is(rerr, ErrNotConnected) {
			err = g.flush()
			if g.ring.n == 0 {
				err = g.send(subject, pos, data)
			}
			err = errors.Join(rerr, err)
		}
		if errors.Is(err, ErrNotConnected) {
			g.keep(subject, pos, data)
		}
		return err
	}
	g.keep(subject, pos, data)
	return nil
}

// send publishes one message; g.mu is held. A message refused with
// ErrNotConnected is not published: the caller keeps it. With echo on, a
// message published goes into the echo ring.
func (g *Gate) send(subject string, pos stream.Pos, data []byte) error {
	var err error
	if g.echoOn {
		rev := g.echo.Revision()
		if err = g.echo.Publish(subject, pos, rev, data); err == nil {
			g.awaitEcho(subject, pos, rev, data)
		}
	} else {
		err = g.pub(subject, pos, data)
	}
	if errors.Is(err, ErrNotConnected) {
		return err
	}
	g.stats.Published++
	g.observed, g.seen = pos, true
	return err
}

// Retry publishes, if this instance is the holder, the messages lost in
// a connection that died (after a reconnect), then the kept messages
// (after an outage: they were refused while the connection was down).
func (g *Gate) Retry() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.active || !g.held() {
		return nil
	}
	err := g.republish()
	if errors.Is(err, ErrNotConnected) || g.ring.n == 0 {
		return err
	}
	return errors.Join(err, g.flush())
}

// keep stores a copy of a message, reusing the slot's buffer; g.mu is held.
func (g *Gate) keep(subject string, pos stream.Pos, data []byte) {
	if g.ring.full() {
		g.ring.pop()
		g.stats.Overflow++
	}
	g.ring.push(subject, pos, 0, data)
	g.stats.Held++
}

// Observe records that the message at pos was published (by the holder,
// or by this instance); kept messages up to pos are dropped.
func (g *Gate) Observe(pos stream.Pos) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen && !g.observed.Less(pos) {
		if g.plausible(pos) {
			g.stats.Echoed += uint64(g.sent.popTo(pos)) // the holder's own, back from the server
		}
		return
	}
	if !g.plausible(pos) {
		g.stats.Ahead++
		return
	}
	g.observed, g.seen = pos, true
	g.stats.Echoed += uint64(g.sent.popTo(pos))
	g.stats.Matched += uint64(g.ring.popTo(pos))
}

// Gain makes this instance the publisher: the messages lost in a
// connection that died (after a reconnect), then the kept messages past
// the last observed position go out first, in order. It returns the
// publish errors, after trying every message.
func (g *Gate) Gain() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active = true
	if g.seen && g.hasOwn && g.own.Less(g.observed) {
		// The holder starts from its own position: it cannot tell the old
		// holder's last message from a forged one.
		g.observed = g.own
	}
	err := g.republish()
	if errors.Is(err, ErrNotConnected) {
		return err
	}
	return errors.Join(err, g.flush())
}

// flush publishes the kept messages past the last observed position, in
// order. It returns the first publish error, after trying every message,
// except that it stops at a message refused with ErrNotConnected, which
// stays kept with those after it; g.mu is held.
func (g *Gate) flush() error {
	var first error
	for g.ring.n > 0 {
		h := g.ring.at(0)
		if g.seen && !g.observed.Less(h.pos) {
			g.ring.pop()
			g.stats.Discarded++
			continue
		}
		err := g.send(h.subject, h.pos, h.data)
		if errors.Is(err, ErrNotConnected) {
			return fmt.Errorf("standby: flush kept messages: %w", err)
		}
		g.ring.pop()
		g.stats.Flushed++
		if err != nil && first == nil {
			first = fmt.Errorf("standby: flush kept messages: %w", err)
		}
	}
	return first
}

// Lose makes this instance a standby again.
func (g *Gate) Lose() {
	g.mu.Lock()
	g.active = false
	g.mu.Unlock()
}

// Active reports whether this instance acts as the publisher.
func (g *Gate) Active() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active && g.held()
}

// Observed returns the last position seen published and whether there is
// one.
func (g *Gate) Observed() (stream.Pos, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.observed, g.seen
}

// countForeign counts a message observed from another group.
func (g *Gate) countForeign() {
	g.mu.Lock()
	g.stats.Foreign++
	g.mu.Unlock()
}

// countUnauthentic counts a message observed without a valid
// authenticator: missing, or else invalid.
func (g *Gate) countUnauthentic(missing bool) {
	g.mu.Lock()
	if missing {
		g.stats.AuthMissing++
	} else {
		g.stats.AuthInvalid++
	}
	g.mu.Unlock()
}

// Stats returns the counters.
func (g *Gate) Stats() GateStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}
