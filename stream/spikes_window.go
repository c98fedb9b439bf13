package stream

import "time"

// maxResendTaken bounds the positions a fence remembers in one resend
// window (16 s of messages at one per frame); the window closes beyond.
const maxResendTaken = 1 << 14

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
