package recorder

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"rgcpred/stream"
)

// Merge returns src with the messages a Filler stored again (on
// FillSubject) put back in their place: each after the recorded message
// it follows, in their order, as a message of its original subject,
// headers and payload, dated when the filler received it. Of a message
// both filled and recorded (stored late: a link that came back), the
// recorded one stays, but for a frames message, whose fill is placed by
// its frames; a filled message an earlier one carries is left out (at
// most dedupKeep messages back). Frames messages are compared by their
// frames too: a fill whose frames were all passed on is left out, and so
// is a recorded frames message whose frames fills all passed on; the
// frames passed on at the head of one are cut from it (at most dedupKeep
// frames back). src is read twice per call, three
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
	fills    []filled       // sorted by anchor, then order
	next     int            // the first fill not yet passed on
	seen     recent[uint64] // the identities passed on, and which were fills
	// filledKeys are the filled messages' identities, stored those of
	// them recorded too (mark).
	filledKeys, stored map[uint64]bool
	frames             frameSet // the frame numbers passed on, and which from fills
}

// recent remembers the last dedupKeep keys put, each with whether a fill
// passed it on.
type recent[K comparable] struct {
	byFill map[K]bool
	fifo   []K
	head   int
}

// get returns whether k was put, and its byFill.
func (r *recent[K]) get(k K) (byFill, ok bool) {
	byFill, ok = r.byFill[k]
	return byFill, ok
}

// put remembers k; a key put again keeps a fill's mark.
func (r *recent[K]) put(k K, byFill bool) {
	if r.byFill == nil {
		r.byFill = map[K]bool{}
	}
	if was, ok := r.byFill[k]; ok {
		r.byFill[k] = was || byFill
		return
	}
	if len(r.fifo) < dedupKeep {
		r.fifo = append(r.fifo, k)
	} else {
		delete(r.byFill, r.fifo[r.head])
		r.fifo[r.head] = k
		r.head = (r.head + 1) % dedupKeep
	}
	r.byFill[k] = byFill
}

// frameSet remembers the last dedupKeep frame numbers passed on, and
// whether a fill passed each: a frames message is compared by its frames,
// since a fill of frames a resend answer brought batches them otherwise
// than the messages recorded live.
type frameSet struct{ recent[int64] }

// passed returns how many of the frames message data's first frames were
// passed on (by a fill only, with byFill), and its frame count; ok is
// false for data that is no frames message (the audit refuses it).
func (fs *frameSet) passed(data []byte, byFill bool) (k, n int, ok bool) {
	first, n, err := stream.PeekFrames(data)
	if err != nil {
		return 0, 0, false
	}
	for ; k < n; k++ {
		fill, ok := fs.get(first + int64(k))
		if !ok || (byFill && !fill) {
			break
		}
	}
	return k, n, true
}

// trim returns the frames message data without its first k frames.
func trim(data []byte, k int) []byte {
	var f stream.Frames
	if err := stream.DecodeFrames(data, &f); err != nil {
		return data
	}
	b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: f.FirstSeq + int64(k), Frames: f.Frames[k:]})
	if err != nil {
		return data
	}
	return b
}

// pass notes the frames of the frames message data as passed on.
func (fs *frameSet) pass(data []byte, byFill bool) {
	first, n, err := stream.PeekFrames(data)
	if err != nil {
		return
	}
	for f := first; f < first+int64(n); f++ {
		fs.put(f, byFill)
	}
}

// filled is a message stored again, decoded.
type filled struct {
	m      Msg
	anchor uint64
	order  fillOrder
}

func newMerger(device string) *merger {
	return &merger{fillSubj: FillSubject(device), kinds: kindsOf(device),
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
			case FillSubjectHeader, FillAfterHeader, FillOrderHeader, FillTimeHeader, FillAnswerHeader:
			default:
				orig[key] = v
			}
		}
		if len(orig) == 0 {
			orig = nil
		}
	}
	mg.filledKeys[identity(subj, m.Data)] = true
	mg.fills = append(mg.fills, filled{m: Msg{Kind: k, Seq: anchor, Time: time.Unix(0, at).UTC(), Data: slices.Clone(m.Data), Subject: subj, Header: orig,
		Answer: h.Get(FillAnswerHeader)},
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
	if filled, _ := mg.seen.get(k); filled {
		// A frames message stored late (a link that came back), after
		// its fill took its place.
		return mg.flush(m.Seq, true, fn)
	}
	if isFrames(m.Subject) {
		// The same, its frames filled in other messages: left out, or
		// the frames fills passed on cut from its head.
		switch k, n, ok := mg.frames.passed(m.Data, true); {
		case !ok:
		case k == n:
			return mg.flush(m.Seq, true, fn)
		case k > 0:
			m.Signed, m.Data = signed(m), trim(m.Data, k)
		}
		mg.frames.pass(m.Data, false)
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
		if _, dup := mg.seen.get(k); dup || mg.stored[k] {
			continue
		}
		if isFrames(f.m.Subject) {
			// Frames passed on already, batched otherwise: left out, or
			// cut from its head.
			switch k, n, ok := mg.frames.passed(f.m.Data, false); {
			case !ok:
			case k == n:
				continue
			case k > 0:
				f.m.Signed, f.m.Data = signed(f.m), trim(f.m.Data, k)
			}
			mg.frames.pass(f.m.Data, true)
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

// signed returns the payload m's authenticator covers.
func signed(m Msg) []byte {
	if m.Signed != nil {
		return m.Signed
	}
	return m.Data
}

// note remembers an identity for dedupKeep messages, and whether a
// filled message's.
func (mg *merger) note(k uint64, filled bool) { mg.seen.put(k, filled) }

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
