package daemon

import (
	"time"

	"rgcpred/stream"
)

// Resender is a Sink that can ask the device to send frames again
// (docs/protocol.md, "Resend"). With Config.ResendWait, a core whose sink
// implements it asks for the frames of a gap before filling it.
type Resender interface {
	// Resend asks the device for frames first .. first+count-1 (count
	// 1 .. stream.MaxResendFrames). The answer comes back through
	// Core.Resent with the same first and count. It must not block; false
	// means no request went out (the core fills the gap at once).
	Resend(first int64, count int) bool
}

// Resend outcomes (ResendStats fields).
const (
	resendAnswered = iota
	resendPartial
	resendNone
	resendTimeout
)

// holdFrames bounds the frames received after a gap that the core keeps
// while it waits for the gap's frames: about a second of a real-time
// stream. Once full, the wait ends and the gap is filled.
const holdFrames = stream.MaxFramesPerMsg

// ResendStats counts the resend requests of a core (Config.ResendWait).
// Every field only grows.
type ResendStats struct {
	// Answered, Partial, None and Timeout count requests by outcome: every
	// frame of the gap came back; some did; none did (an empty answer, no
	// device answering, or no request sent); the wait ended first (its
	// deadline, holding room full, or a control message to apply).
	Answered, Partial, None, Timeout uint64
	// Recovered counts the gap bins filled with the device's frames.
	Recovered uint64
	// Ignored counts answer frames not used: outside the gap asked for,
	// already received, or answering a request that is no longer pending
	// (the frames were processed already).
	Ignored uint64
}

// gapWait is a gap whose frames the core asked the device for: the gap,
// the frames of it received, and the frames received after it, held in
// arrival order until the answer or the deadline.
type gapWait struct {
	on           bool
	first, count int64
	at, until    time.Time // arrival of the frame after the gap, the wait's deadline
	got          []stream.Frame
	have         []bool
	n            int // frames of the gap received
	seqs         []int64
	frames       []stream.Frame
	ats          []time.Time
	nh           int   // frames held
	left         int64 // while released: the frames received not yet given to FramesAt
	view         stream.Frames
	stats        ResendStats
}

func newGapWait() gapWait {
	return gapWait{
		got: make([]stream.Frame, stream.MaxResendFrames), have: make([]bool, stream.MaxResendFrames),
		seqs: make([]int64, holdFrames), frames: make([]stream.Frame, holdFrames), ats: make([]time.Time, holdFrames),
	}
}

// ResendStats returns the resend counters.
func (c *Core) ResendStats() ResendStats { return c.gw.stats }

// Waiting reports whether the core waits for a gap's frames (Resent).
func (c *Core) Waiting() bool { return c.gw.on }

// Receive is FramesAt with gap recovery (Config.ResendWait and a sink
// that is a Resender): a message that leaves a gap the stream would fill
// is held, with what follows it, and the gap's frames are asked for; the
// answer (Resent) or the deadline (checked at each message and at Expire)
// ends the wait, and the frames are then processed in order, the gap's
// missing ones filled as FramesAt does. Decisions after a gap come late
// but equal to those without the gap. A zero at (untimed input) never
// waits. It allocates nothing.
func (c *Core) Receive(f *stream.Frames, backlog int64, at time.Time) {
	w := &c.gw
	if w.on {
		if !at.IsZero() && at.Before(w.until) && w.nh+len(f.Frames) <= holdFrames {
			w.hold(f, at)
			return
		}
		c.release(resendTimeout, backlog+int64(len(f.Frames)))
	}
	if c.ask(f, at) {
		w.hold(f, at)
		return
	}
	c.FramesAt(f, backlog, at)
}

// ask starts a wait when f's first frame continues the current stream
// after a gap that FramesAt would fill, and asks the sink for the gap's
// frames; it reports whether the core now waits.
func (c *Core) ask(f *stream.Frames, at time.Time) bool {
	if c.resender == nil || c.cfg.ResendWait <= 0 || at.IsZero() || !c.started || c.cand.n > 0 ||
		(c.resetAt >= 0 && f.FirstSeq >= c.resetAt) {
		return false
	}
	gap := f.FirstSeq - c.last - 1
	if gap < 1 || gap > stream.MaxResendFrames {
		return false
	}
	c.at = at // the wall-time rule judges the gap at this message's arrival
	if gap > c.allowedGap() {
		return false
	}
	w := &c.gw
	if !c.resender.Resend(c.last+1, int(gap)) {
		w.stats.None++
		return false
	}
	w.on, w.first, w.count, w.at, w.until, w.n, w.nh = true, c.last+1, gap, at, at.Add(c.cfg.ResendWait), 0, 0
	return true
}

// hold keeps f's frames, arrived at at, until the wait ends.
func (w *gapWait) hold(f *stream.Frames, at time.Time) {
	for i := range f.Frames {
		w.seqs[w.nh], w.frames[w.nh], w.ats[w.nh] = f.FirstSeq+int64(i), f.Frames[i], at
		w.nh++
	}
}

// Resent gives the core the device's answer to its request for frames
// first .. first+count-1 (Resender.Resend): the frames it resent, nil or
// empty when it resent none or did not answer. The gap's frames among
// them are spliced in and the held frames processed; the rest are
// ignored and counted. An answer to a request no longer pending is
// ignored. It allocates nothing.
func (c *Core) Resent(first int64, count int, f *stream.Frames) {
	w := &c.gw
	n := 0
	if f != nil {
		n = len(f.Frames)
	}
	if !w.on || first != w.first || int64(count) != w.count {
		w.stats.Ignored += uint64(n)
		return
	}
	for i := range n {
		k := f.FirstSeq + int64(i) - w.first
		if k < 0 || k >= w.count || w.have[k] {
			w.stats.Ignored++
			continue
		}
		w.got[k], w.have[k] = f.Frames[i], true
		w.n++
	}
	switch {
	case int64(w.n) == w.count:
		c.release(resendAnswered, 0)
	case w.n > 0:
		c.release(resendPartial, 0)
	default:
		c.release(resendNone, 0)
	}
}

// Expire ends a wait whose deadline passed by now (call it between
// messages when nothing arrives, from the goroutine feeding the core).
func (c *Core) Expire(now time.Time) {
	if c.gw.on && !now.Before(c.gw.until) {
		c.release(resendTimeout, 0)
	}
}

// EndWait ends a wait at once, filling what is missing of the gap; call
// it before a control message, which applies after the frames received
// before it.
func (c *Core) EndWait() {
	if c.gw.on {
		c.release(resendTimeout, 0)
	}
}

// drop forgets a wait and its frames (a restored state supersedes what
// this core received; a standby replays its own retained messages).
func (w *gapWait) drop() {
	if !w.on {
		return
	}
	w.on, w.n, w.nh = false, 0, 0
	clear(w.have)
	w.stats.Timeout++
}

// release ends the wait with outcome: the gap's frames received are
// processed (at the arrival of the frame after the gap; FramesAt fills
// what is missing), then the held frames in order. backlog frames more
// wait behind them. The frames not yet processed count as received for
// the overload policy (Config.MaxLag), as frames queued do.
func (c *Core) release(outcome int, backlog int64) {
	w := &c.gw
	w.on = false
	switch outcome {
	case resendAnswered:
		w.stats.Answered++
	case resendPartial:
		w.stats.Partial++
	case resendNone:
		w.stats.None++
	default:
		w.stats.Timeout++
	}
	w.stats.Recovered += uint64(w.n)
	w.left = int64(w.n + w.nh)
	for i := int64(0); i < w.count; {
		if !w.have[i] {
			i++
			continue
		}
		j := i
		for j < w.count && w.have[j] {
			w.have[j] = false
			j++
		}
		w.view.FirstSeq, w.view.Frames = w.first+i, w.got[i:j]
		w.left -= j - i
		c.FramesAt(&w.view, backlog+w.left, w.at)
		i = j
	}
	for i := 0; i < w.nh; {
		j := i + 1
		for j < w.nh && j-i < stream.MaxFramesPerMsg && w.seqs[j] == w.seqs[j-1]+1 && w.ats[j].Equal(w.ats[i]) {
			j++
		}
		w.view.FirstSeq, w.view.Frames = w.seqs[i], w.frames[i:j]
		w.left -= int64(j - i)
		c.FramesAt(&w.view, backlog+w.left, w.ats[i])
		i = j
	}
	w.n, w.nh, w.left, w.view.Frames = 0, 0, 0, nil
}
