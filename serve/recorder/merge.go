package recorder

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"
)

// Merge returns src with the messages a Filler stored again (on
// FillSubject) put back in their place: each after the recorded message
// it follows, in their order, as a message of its original subject,
// headers and payload, dated when the filler received it. Of a message
// both filled and recorded (stored late: a link that came back), the
// recorded one stays, but for a frames message, whose fill is placed by
// its frames; a filled message an earlier one carries is left out (at
// most dedupKeep messages back). src is read twice per call, three
// times when it holds filled messages.
func Merge(src Source, device string) Source {
	return func(ctx context.Context, fn func(Msg) error) error {
		mg := newMerger(device)
		err := src(ctx, func(m Msg) error {
			if m.Subject == mg.fillSubj {
				mg.add(m)
			}
			return nil
		})
		if err != nil {
			return err
		}
		mg.sort()
		if len(mg.fills) > 0 {
			if err := src(ctx, func(m Msg) error {
				if m.Subject != mg.fillSubj {
					mg.mark(m)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if err := src(ctx, func(m Msg) error {
			if m.Subject == mg.fillSubj {
				return nil
			}
			return mg.recorded(m, fn)
		}); err != nil {
			return err
		}
		return mg.end(fn)
	}
}

// dedupKeep is how many recorded and filled messages back a filled copy
// is recognised as one.
const dedupKeep = 1 << 18

// merger puts filled messages back among the recorded ones.
type merger struct {
	fillSubj string
	kinds    map[string]Kind
	fills    []filled // sorted by anchor, then order
	next     int      // the first fill not yet passed on
	seen     map[uint64]bool
	// filledKeys are the filled messages' identities, stored those of
	// them recorded too (mark).
	filledKeys, stored map[uint64]bool
	fifo               []uint64 // seen's keys in order, at most dedupKeep
	head               int
}

// filled is a message stored again, decoded.
type filled struct {
	m      Msg
	anchor uint64
	order  fillOrder
}

func newMerger(device string) *merger {
	return &merger{fillSubj: FillSubject(device), kinds: kindsOf(device), seen: map[uint64]bool{},
		filledKeys: map[uint64]bool{}, stored: map[uint64]bool{}}
}

// add takes a message of the fill subject; one with malformed fill
// headers or an unknown original subject is left out.
func (mg *merger) add(m Msg) {
	h := m.Header
	subj := h.Get(FillSubjectHeader)
	k, ok := mg.kinds[subj]
	if !ok || k == KindSession {
		return
	}
	anchor, err := strconv.ParseUint(h.Get(FillAfterHeader), 10, 64)
	if err != nil {
		return
	}
	o, err := parseOrder(h.Get(FillOrderHeader))
	if err != nil {
		return
	}
	at, err := strconv.ParseInt(h.Get(FillTimeHeader), 10, 64)
	if err != nil {
		return
	}
	orig := h
	if len(h) > 0 {
		orig = make(map[string][]string, len(h))
		for key, v := range h {
			switch key {
			case FillSubjectHeader, FillAfterHeader, FillOrderHeader, FillTimeHeader:
			default:
				orig[key] = v
			}
		}
		if len(orig) == 0 {
			orig = nil
		}
	}
	mg.filledKeys[identity(subj, m.Data)] = true
	mg.fills = append(mg.fills, filled{m: Msg{Kind: k, Seq: anchor, Time: time.Unix(0, at).UTC(), Data: slices.Clone(m.Data), Subject: subj, Header: orig},
		anchor: anchor, order: o})
}

func (mg *merger) sort() {
	slices.SortStableFunc(mg.fills, func(a, b filled) int {
		switch {
		case a.anchor != b.anchor:
			return cmp.Compare(a.anchor, b.anchor)
		case a.order.less(b.order):
			return -1
		case b.order.less(a.order):
			return 1
		}
		return 0
	})
}

// recorded passes on a recorded message, after the fills placed before it
// and before those placed right after it.
func (mg *merger) recorded(m Msg, fn func(Msg) error) error {
	if err := mg.flush(m.Seq, false, fn); err != nil {
		return err
	}
	k := identity(m.Subject, m.Data)
	if filled, ok := mg.seen[k]; ok && filled {
		// A frames message stored late (a link that came back), after
		// its fill took its place.
		return mg.flush(m.Seq, true, fn)
	}
	mg.note(k, false)
	if err := fn(m); err != nil {
		return err
	}
	return mg.flush(m.Seq, true, fn)
}

// end passes on the fills placed after the last recorded message.
func (mg *merger) end(fn func(Msg) error) error {
	return mg.flush(^uint64(0), true, fn)
}

// flush passes on the fills placed before seq (and after it with
// inclusive), numbering each after its anchor.
func (mg *merger) flush(seq uint64, inclusive bool, fn func(Msg) error) error {
	var fill uint32
	var at uint64
	for ; mg.next < len(mg.fills); mg.next++ {
		f := &mg.fills[mg.next]
		if f.anchor > seq || (f.anchor == seq && !inclusive) {
			return nil
		}
		if f.anchor != at || fill == 0 {
			at, fill = f.anchor, 0
		}
		k := identity(f.m.Subject, f.m.Data)
		if _, dup := mg.seen[k]; dup || mg.stored[k] {
			continue
		}
		mg.note(k, true)
		fill++
		m := f.m
		m.Fill = fill
		if err := fn(m); err != nil {
			mg.next++
			return err
		}
	}
	return nil
}

// note remembers an identity for dedupKeep messages, and whether a
// filled message's.
func (mg *merger) note(k uint64, filled bool) {
	if len(mg.fifo) < dedupKeep {
		mg.fifo = append(mg.fifo, k)
	} else {
		delete(mg.seen, mg.fifo[mg.head])
		mg.fifo[mg.head] = k
		mg.head = (mg.head + 1) % dedupKeep
	}
	mg.seen[k] = filled
}

// mark notes a recorded message other than frames whose subject and
// payload a filled message carries (stored after all, late: a link that
// came back): the recorded one stays in its place, the filled one is left
// out. A frames message's fill keeps its place by frame number, and the
// recorded copy that comes after it is left out (recorded).
func (mg *merger) mark(m Msg) {
	if k := identity(m.Subject, m.Data); mg.filledKeys[k] && !isFrames(m.Subject) {
		mg.stored[k] = true
	}
}
