package stream

import (
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

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
	mu sync.Mutex
	// fence admits what is received and keeps each cell's windows in
	// order (nil: none, for tests of the hold alone).
	fence   *Fence
	deliver func(d *Decisions)
	groups  map[string]*heldGroup
	// afterFunc runs f once d has passed (nil: time.AfterFunc); tests
	// fire the hold's timers themselves.
	afterFunc func(d time.Duration, f func())
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
			hg := &heldGroup{}
			h.groups[g] = hg
			h.after(ResendHold, func() {
				h.mu.Lock()
				defer h.mu.Unlock()
				if h.groups[g] == hg { // not a later hold of the same group
					h.release(g)
				}
			})
		}
	}
}

// after runs f once d has passed, on a goroutine of its own (through
// afterFunc when set).
func (h *resendHold) after(d time.Duration, f func()) {
	if h.afterFunc != nil {
		h.afterFunc(d, f)
		return
	}
	time.AfterFunc(d, f)
}

// receive passes one decoded decisions message, with headers hdr and
// received at now, through the fence; it holds what the fence takes
// while the message's group is held, and hands it on otherwise (h.mu is
// held).
func (h *resendHold) receive(hdr nats.Header, d *Decisions, now time.Time) {
	admitted := h.fence.Admit(hdr, now)
	pos, err := ParsePos(hdr.Get(PosHeader))
	positioned := err == nil
	group := hdr.Get(GroupHeader)
	if positioned && len(h.groups) > 0 {
		taken := d
		if !admitted {
			taken = nil
		}
		if h.take(group, pos, taken, hdr.Get(CopyHeader) != "") {
			return
		}
	}
	if admitted {
		h.hand(group, pos, positioned, d)
	}
}

// hand delivers d, a message of group at pos (positioned: it has one),
// less the decisions of a window not after one already handed on for
// their cell (Fence.order) (h.mu is held).
func (h *resendHold) hand(group string, pos Pos, positioned bool, d *Decisions) {
	if positioned && h.fence != nil && !h.fence.order(group, pos, d) {
		return
	}
	h.deliver(d)
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
		h.hand(group, g.msgs[i].pos, true, &g.msgs[i].d)
	}
}
