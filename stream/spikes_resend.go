package stream

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// SpikesResendSubject is the subject on which a device asks a hot-standby
// group's holder to publish again the decisions messages it missed while
// its subscription was not back (docs/protocol.md, "Decisions resend").
func SpikesResendSubject(device string) string { return "rgc." + device + ".spikes.resend" }

// Headers of a decisions resend answer (docs/protocol.md, "Decisions
// resend").
const (
	// ResentHeader carries how many messages the holder published again
	// (a decimal number).
	ResentHeader = "Rgc-Resent"
	// CopyHeader marks a message published again ("1"): the device's
	// decision subscription holds what it takes until the last copy
	// came. It is not signed: a forged one only ends the hold early.
	CopyHeader = "Rgc-Copy"
	// ResentToHeader carries the position of the last message published
	// again (absent when none).
	ResentToHeader = "Rgc-Resent-To"
	// ResendGapHeader is "1" when the holder no longer keeps every message
	// after the requested position: some are lost.
	ResendGapHeader = "Rgc-Resend-Gap"
	// ResendRefusedHeader carries the reason a request was refused
	// (auth_missing, auth_invalid, replayed, malformed, limited).
	ResendRefusedHeader = "Rgc-Resend-Refused"
)

// Timing of a decisions resend. The device asks after each reconnect,
// once its subscription is registered (a Flush), each try waiting
// ResendTimeout for the answer, until one answers or ResendTries were
// made (a group electing its holder answers nothing for a while). Its
// fence takes the copies for ResendWindow after the last try.
const (
	ResendTimeout = 500 * time.Millisecond
	ResendTries   = 20
	ResendWindow  = 2 * time.Second
)

// resendSpan bounds the tries of one request: each waits ResendTimeout,
// then half as long before the next.
const resendSpan = ResendTries * (ResendTimeout + ResendTimeout/2)

// maxResendTaken bounds the positions a fence remembers in one resend
// window (16 s of messages at one per frame); the window closes beyond.
const maxResendTaken = 1 << 14

// ResendStats counts a Publisher's decisions resend requests. Every field
// only grows.
type ResendStats struct {
	// Requests counts requests sent (each try).
	Requests uint64
	// Answered counts requests a holder answered; Refused those it
	// refused (ResendRefusedHeader); Unanswered those that got no answer
	// after every try.
	Answered, Refused, Unanswered uint64
	// Announced sums the holders' ResentHeader counts.
	Announced uint64
	// Gaps counts answers with ResendGapHeader: decisions lost.
	Gaps uint64
}

// resendCounters are a Publisher's ResendStats.
type resendCounters struct {
	requests, answered, refused, unanswered, announced, gaps atomic.Uint64
}

// SpikesResent returns the counters of the decisions resend requests the
// publisher's decision subscriptions sent.
func (p *Publisher) SpikesResent() ResendStats {
	c := &p.resend
	return ResendStats{Requests: c.requests.Load(), Answered: c.answered.Load(), Refused: c.refused.Load(),
		Unanswered: c.unanswered.Load(), Announced: c.announced.Load(), Gaps: c.gaps.Load()}
}

// reconnects returns how often the publisher's connection reconnected.
func (p *Publisher) reconnects() uint64 { return p.nc.Stats().Reconnects }

// watchReconnects asks, after each reconnect of the publisher's
// connection, for the decisions messages f's groups published while sub
// was not back, until sub is closed.
func (p *Publisher) watchReconnects(sub *nats.Subscription, f *Fence, h *resendHold) {
	conn := p.nc.StatusChanged(nats.CONNECTED)
	closed := sub.StatusChanged(nats.SubscriptionClosed)
	go func() {
		defer p.nc.RemoveStatusListener(conn)
		for {
			select {
			case <-closed:
				return
			case _, ok := <-conn:
				if !ok {
					return
				}
				h.mu.Lock()
				h.begin(f.lost(p.reconnects(), time.Now()))
				h.mu.Unlock()
				p.resendSpikes(closed, f, h)
			}
		}
	}()
}

// resendSpikes sends f's resend requests once the subscription is
// registered again: the request then travels behind the subscription's
// interest, so whatever the holder publishes after it read the request
// reaches the device.
func (p *Publisher) resendSpikes(closed <-chan nats.SubStatus, f *Fence, h *resendHold) {
	ctx, cancel := context.WithTimeout(context.Background(), resendSpan)
	defer cancel()
	if err := p.nc.FlushWithContext(ctx); err != nil {
		f.closeWindows()
		return // disconnected again: the next reconnect asks
	}
	for _, r := range f.resendFrom(time.Now().Add(resendSpan + ResendWindow)) {
		to, hasTo, ok := p.requestResend(closed, r)
		if ok {
			f.closeAt(r.group, time.Now().Add(ResendWindow)) // the copies went out before the answer
		}
		h.answered(r.group, to, hasTo)
	}
}

// requestResend asks the holder of r.group for the messages after r.after,
// trying until one answers or ResendTries were made. It reports whether
// the holder answered with its copies (ok), and the last copy's position
// (hasTo: there were copies).
func (p *Publisher) requestResend(closed <-chan nats.SubStatus, r resendAt) (to Pos, hasTo, ok bool) {
	for try := 0; try < ResendTries; try++ {
		m := &nats.Msg{Subject: SpikesResendSubject(p.device), Header: nats.Header{}}
		m.Header.Set(GroupHeader, r.group)
		m.Header.Set(PosHeader, r.after.String())
		p.mu.Lock()
		stampTime(m, &p.stamp)
		if p.up != nil {
			p.up.Sign(m)
		}
		p.mu.Unlock()
		p.resend.requests.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), ResendTimeout)
		a, err := p.nc.RequestMsgWithContext(ctx, m)
		cancel()
		switch {
		case err == nil && a.Header.Get(ResendRefusedHeader) != "":
			p.resend.refused.Add(1)
			return Pos{}, false, false
		case err == nil:
			p.resend.answered.Add(1)
			n, _ := strconv.ParseUint(a.Header.Get(ResentHeader), 10, 64)
			p.resend.announced.Add(n)
			if a.Header.Get(ResendGapHeader) == "1" {
				p.resend.gaps.Add(1)
			}
			to, err := ParsePos(a.Header.Get(ResentToHeader))
			return to, n > 0 && err == nil, true
		case errors.Is(err, nats.ErrConnectionClosed):
			return Pos{}, false, false
		}
		select {
		case <-closed:
			return Pos{}, false, false
		case <-time.After(ResendTimeout / 2):
		}
	}
	p.resend.unanswered.Add(1)
	return Pos{}, false, false
}

// resendAt is one resend request: the messages of group after a position.
type resendAt struct {
	group string
	after Pos
}

// window is a mark's resend window: opened when the connection was lost
// (from is the last position accepted before), it takes once each
// message after from and at or before the mark that it did not take
// already (a copy the group's holder publishes again), whatever its lease
// revision: same position, same message. It closes at until (zero: open
// until the requests are sent).
type window struct {
	from  Pos
	until time.Time
	taken map[Pos]struct{}
}

// open reports whether w still takes copies at now.
func (w *window) open(now time.Time) bool {
	return w != nil && (w.until.IsZero() || !now.After(w.until)) && len(w.taken) < maxResendTaken
}

// lost opens a resend window on every mark, once per reconnect gen (the
// connection's reconnect count): the decision subscription calls it
// before the first message it admits on a new connection, the reconnect
// watcher before its requests, whichever comes first. A window still
// open keeps its from: the requests ask from there. It returns the groups
// whose windows it opened or kept open (none when gen was seen).
func (f *Fence) lost(gen uint64, now time.Time) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen <= f.gen {
		return nil
	}
	f.gen = gen
	groups := make([]string, 0, len(f.marks))
	for g, m := range f.marks {
		groups = append(groups, g)
		if m.win.open(now) {
			m.win.until = time.Time{}
			continue
		}
		m.win = &window{from: m.last, taken: map[Pos]struct{}{}}
	}
	return groups
}

// resendFrom returns a request per open window, each closing at until.
func (f *Fence) resendFrom(until time.Time) []resendAt {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []resendAt
	for g, m := range f.marks {
		if m.win.open(time.Now()) {
			m.win.until = until
			out = append(out, resendAt{group: g, after: m.win.from})
		}
	}
	return out
}

// closeAt closes group's window at t if it is open later: its copies were
// published before the answer, so they arrive within a short hold. A
// later reconnect then opens a new window from the mark of its own loss
// rather than asking again from the old one.
func (f *Fence) closeAt(group string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.marks[group]; m != nil && m.win != nil && (m.win.until.IsZero() || m.win.until.After(t)) {
		m.win.until = t
	}
}

// closeWindows closes the windows whose requests could not be sent.
func (f *Fence) closeWindows() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.marks {
		if m.win != nil && m.win.until.IsZero() {
			m.win.until = time.Now().Add(ResendWindow)
		}
	}
}

// admitResent decides a message at pos at or before m's mark: a copy a
// holder published again, taken once if m's window is open and pos is
// after its from. ok reports whether the window decided; f.mu is held.
func (f *Fence) admitResent(m *mark, pos Pos, now time.Time) (take, ok bool) {
	w := m.win
	if !w.open(now) {
		m.win = nil
		return false, false
	}
	if !w.from.Less(pos) {
		return false, false
	}
	if _, dup := w.taken[pos]; dup {
		f.stats.Repeated++
		return false, true
	}
	w.taken[pos] = struct{}{}
	f.stats.Resent++
	return true, true
}

// noteTaken records a message accepted past the mark in m's open window.
func (m *mark) noteTaken(pos Pos, now time.Time) {
	if m.win.open(now) && m.win.from.Less(pos) {
		m.win.taken[pos] = struct{}{}
	}
}

// ResendHold bounds how long a decision subscription holds the decisions
// it takes after a reconnect while it waits for the holder's copies, so
// that it hands them on in position order (a copy of a missed window
// before the live decisions after it).
const ResendHold = time.Second

// resendHold keeps, per group, the decisions a subscription took since
// its connection came back until the holder's copies are in (the copy at
// the answer's ResentToHeader position came, taken or not), the answer
// said there are none, or ResendHold passed; then it hands them on in
// position order. Live messages that came before the copies are at or
// before that position (the holder published them before it read the
// request); those after it come after the copies. Its mutex serialises every delivery: the
// subscription's and a release by the reconnect watcher or a timer.
type resendHold struct {
	mu      sync.Mutex
	deliver func(d *Decisions)
	groups  map[string]*heldGroup
}

// heldGroup is one group's held decisions.
type heldGroup struct {
	to    Pos // the last copy's position, once answered with copies
	hasTo bool
	// copied is the newest position of the group's copies received since
	// holding began, taken or not (a copy of one taken live is dropped).
	copied    Pos
	hasCopied bool
	msgs      []heldMsg
}

// heldMsg is a held decisions message (an owned copy).
type heldMsg struct {
	pos Pos
	d   Decisions
}

// begin starts holding the decisions of groups (h.mu is held), released
// at the latest after ResendHold.
func (h *resendHold) begin(groups []string) {
	if len(groups) == 0 {
		return
	}
	if h.groups == nil {
		h.groups = map[string]*heldGroup{}
	}
	for _, g := range groups {
		if h.groups[g] == nil {
			h.groups[g] = &heldGroup{}
			time.AfterFunc(ResendHold, func() { h.answered(g, Pos{}, false) })
		}
	}
}

// take handles a message of group at pos received while group is held
// (copy: it carries CopyHeader): d (nil: the fence dropped it) is kept,
// and the group's held decisions go once the last copy came. It reports
// whether group is held (h.mu is held).
func (h *resendHold) take(group string, pos Pos, d *Decisions, copy bool) bool {
	g := h.groups[group]
	if g == nil {
		return false
	}
	if d != nil {
		g.msgs = append(g.msgs, heldMsg{pos: pos, d: Decisions{Decisions: slices.Clone(d.Decisions)}})
	}
	if !copy {
		return true
	}
	if !g.hasCopied || g.copied.Less(pos) {
		g.copied, g.hasCopied = pos, true
	}
	if g.hasTo && !pos.Less(g.to) {
		h.release(group)
	}
	return true
}

// answered records the holder's answer for group: the last copy's
// position (hasTo), or none (no copies, no answer, or ResendHold passed:
// the held decisions go at once).
func (h *resendHold) answered(group string, to Pos, hasTo bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.groups[group]
	if g == nil {
		return
	}
	if hasTo && (!g.hasCopied || g.copied.Less(to)) {
		g.to, g.hasTo = to, true
		return
	}
	h.release(group)
}

// release hands on group's held decisions in position order and stops
// holding it (h.mu is held).
func (h *resendHold) release(group string) {
	g := h.groups[group]
	delete(h.groups, group)
	slices.SortStableFunc(g.msgs, func(a, b heldMsg) int {
		switch {
		case a.pos.Less(b.pos):
			return -1
		case b.pos.Less(a.pos):
			return 1
		}
		return 0
	})
	for i := range g.msgs {
		h.deliver(&g.msgs[i].d)
	}
}
