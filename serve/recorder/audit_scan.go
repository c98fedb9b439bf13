package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// place is a message's position in a recording read through Merge: its
// stream sequence number, and for a message stored again its rank among
// those put back after it.
type place struct {
	seq  uint64
	fill uint32
}

func placeOf(m Msg) place { return place{seq: m.Seq, fill: m.Fill} }

func (p place) less(q place) bool { return p.seq < q.seq || (p.seq == q.seq && p.fill < q.fill) }

// compare orders p and q as less does: -1, 0 or 1.
func (p place) compare(q place) int {
	switch {
	case p.less(q):
		return -1
	case q.less(p):
		return 1
	}
	return 0
}

// start is a recorded stream start whose first frame is recorded near
// it: where an audit can begin a fresh core.
type start struct {
	ev     stream.Event
	at     place // the event
	frames place // the frames message holding ev.First
}

// early reports whether the stream start is recorded before the frames
// message holding its first frame.
func (s start) early() bool { return s.at.less(s.frames) }

// holeAt is a hole and the place of the frames message after it.
type holeAt struct {
	Hole
	at place
}

// scanned is what the first pass finds.
type scanned struct {
	session *Session
	// starts are the recorded stream starts, in order; the first is where
	// the replay begins.
	starts []start
	// holes are the recording's holes after the first start's frame.
	holes []holeAt
	// skipped holds the recorded KindSkipped decisions from the first
	// start on.
	skipped map[key]bool
}

// recentFrames is how many frames messages back a stream start's first
// frame is looked for: the daemon announces a start once a new numbering
// is confirmed, a few messages after its first frame.
const recentFrames = 4096

// aheadFrames is how many frames messages after a stream start its first
// frame is looked for when none before holds it. The daemon announces a
// start after a reset, or its first, on the frames message holding its
// first frame; the device's message and the daemon's answer reach the
// stream's leader by different paths, and the stream stores them in the
// order they arrive, so the answer may come first (seed 7303: the
// session's only start stored 3 messages before its frames).
const aheadFrames = 256

// pending is a stream start no recorded frames message held the first
// frame of yet, looked for in the next left frames messages.
type pending struct {
	ev   stream.Event
	at   place
	left int
}

// fspan is a recorded frames message.
type fspan struct {
	at          place
	first, last int64
}

// lines follows the recording's frames numbering to find its holes: the
// frames go on where they stopped, or a new numbering goes on for at
// least two messages and daemon.DefaultConfirmFrames frames (a device's
// jump; a message injected far ahead, or a stale copy, does not); a new
// numbering ahead of the old one leaves a gap.
type lines struct {
	ok   bool
	last int64
	cand *candidate
	gaps []holeAt
}

type candidate struct {
	at          place
	first, last int64
	msgs        int
}

func (l *lines) frames(at place, first, last int64) {
	switch {
	case !l.ok:
		l.ok, l.last = true, last
		return
	case first <= l.last+1 && last > l.last && first >= l.last-int64(stream.MaxFramesPerMsg):
		l.last = last
		if c := l.cand; c != nil && c.first <= l.last+1 && c.last > l.last {
			l.last = c.last // a message recorded just before the one it follows
		}
		l.cand = nil
		return
	}
	if c := l.cand; c != nil && first == c.last+1 {
		c.last = last
		c.msgs++
	} else {
		l.cand = &candidate{at: at, first: first, last: last, msgs: 1}
	}
	if c := l.cand; c.msgs >= 2 && c.last-c.first+1 >= daemon.DefaultConfirmFrames {
		if c.first > l.last+1 {
			l.gaps = append(l.gaps, holeAt{Hole: Hole{From: l.last + 1, To: c.first - 1, Seq: c.at.seq}, at: c.at})
		}
		l.last, l.cand = c.last, nil
	}
}

func scan(ctx context.Context, src Source) (*scanned, error) {
	sc := &scanned{skipped: map[key]bool{}}
	var ev stream.Event
	var ds stream.Decisions
	var recent []fspan
	var ahead []pending
	var ln lines
	err := src(ctx, func(m Msg) error {
		at := placeOf(m)
		switch m.Kind {
		case KindSession:
			var s Session
			if err := json.Unmarshal(m.Data, &s); err != nil {
				return fmt.Errorf("recorder: session header at %d: %w", m.Seq, err)
			}
			sc.session = &s
		case KindFrames:
			first, n, err := stream.PeekFrames(m.Data)
			if err != nil {
				return nil // refused by the daemon too; the replay counts it
			}
			if len(recent) == recentFrames {
				recent = recent[:copy(recent, recent[1:])]
			}
			recent = append(recent, fspan{at: at, first: first, last: first + int64(n) - 1})
			ln.frames(at, first, first+int64(n)-1)
			kept := ahead[:0]
			for _, p := range ahead {
				switch {
				case first <= p.ev.First && p.ev.First < first+int64(n):
					sc.starts = append(sc.starts, start{ev: p.ev, at: p.at, frames: at})
				case p.left > 1:
					p.left--
					kept = append(kept, p)
				}
			}
			ahead = kept
		case KindEvent:
			if stream.PayloadType(m.Data) == stream.TypeDrop {
				return nil
			}
			if err := stream.DecodeEvent(m.Data, &ev); err != nil {
				return fmt.Errorf("recorder: event at %d: %w", m.Seq, err)
			}
			i := len(recent) - 1
			for ; i >= 0; i-- {
				if h := recent[i]; h.first <= ev.First && ev.First <= h.last {
					sc.starts = append(sc.starts, start{ev: ev, at: at, frames: h.at})
					break
				}
			}
			if i < 0 {
				ahead = append(ahead, pending{ev: ev, at: at, left: aheadFrames})
			}
		case KindDecisions:
			if len(sc.starts) == 0 && len(ahead) == 0 {
				return nil
			}
			if err := stream.DecodeDecisions(m.Data, &ds); err != nil {
				return fmt.Errorf("recorder: decisions at %d: %w", m.Seq, err)
			}
			for i := range ds.Decisions {
				if d := &ds.Decisions[i]; d.Kind == stream.KindSkipped {
					sc.skipped[keyOf(d)] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recorder: audit scan: %w", err)
	}
	if len(sc.starts) == 0 {
		return nil, fmt.Errorf("recorder: audit: %w", ErrEmpty)
	}
	slices.SortStableFunc(sc.starts, func(x, y start) int { return x.at.compare(y.at) })
	first := sc.starts[0].frames
	for _, g := range ln.gaps {
		if g.at.less(first) || restartAt(sc.starts, g) {
			continue
		}
		sc.holes = append(sc.holes, g)
	}
	return sc, nil
}

// restartAt reports whether a recorded stream start begins at the frame
// after gap g: the daemon adopted the new numbering there, so the gap is
// the device's jump, not a hole.
func restartAt(starts []start, g holeAt) bool {
	for _, s := range starts {
		if s.ev.First == g.To+1 && (!s.at.less(g.at) || !s.frames.less(g.at)) {
			return true
		}
	}
	return false
}
