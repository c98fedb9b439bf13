package daemon

import (
	"time"

	"rgcpred/rgc"
	"rgcpred/stream"
)

// Resender is a Sink that can ask the device to send frames again
// (docs/protocol.md, "Resend"). With Config.ResendWait, a core whose sink
// implements it asks for the frames of a gap before filling it, or, for a
// gap longer than a window that wall time allows, before restarting the
// stream.
type Resender interface {
	// Resend asks the device for frames first .. first+count-1 (count
	// 1 .. stream.MaxResendFrames). The answer comes back through
	// Core.Resent with the same first and count. It must not block; false
	// means no request went out (the core fills the gap at once).
	Resend(first int64, count int) bool
}

// holdFrames bounds the frames received after a gap that the core keeps
// while it waits for the gap's frames, whatever the gap's length: about
// 8 s of a real-time stream, so that a gap inside the burst that follows
// a reconnect (the frames a device buffered while cut off, come at once)
// still waits for its answer. Once full, the wait ends and the gap is
// filled.
const holdFrames = 8 * stream.MaxFramesPerMsg

// MaxResendGap is the longest gap the core asks the device for: the
// frames a device keeps (stream.ResendRingFrames), asked for in requests
// of at most stream.MaxResendFrames. A longer gap goes the way of a gap
// without resend (a new numbering, a restart).
const MaxResendGap = stream.ResendRingFrames

// maxRequests is the most requests one gap takes (16), all in flight at
// once; serve/service queues twice as many answers.
const maxRequests = MaxResendGap / stream.MaxResendFrames

// TailAfter is how long a stream receives no frame before the core asks
// the device for the frames after its last one (AskTail): far longer than
// a paced device's pause between messages, far shorter than the frames a
// device keeps (stream.ResendRingFrames, about 16.5 s).
const TailAfter = 250 * time.Millisecond

// tailBackoffMax caps the pause between a silence's tail requests that got
// no answer (TailAfter, then 0.5 s, then 1 s apart): a replica behind a
// healed partition converges within it. TailGiveUp bounds the silence
// asked about: about 30 requests, at most one a second after the third.
const (
	tailBackoffMax = time.Second
	TailGiveUp     = 30 * time.Second
)

// ResendStats counts the resend requests of a core (Config.ResendWait).
// Every field only grows.
type ResendStats struct {
	// Answered, Partial, None and Timeout count requests by outcome: every
	// frame asked for came back; some did; none did (an empty answer, no
	// device answering, or the request not sent); the wait ended first
	// (its deadline, holding room full, or a control message to apply). A
	// gap longer than stream.MaxResendFrames takes several requests.
	Answered, Partial, None, Timeout uint64
	// Long counts the gaps longer than a window asked for: each ended in
	// the same stream when the device resent every frame of it.
	Long uint64
	// Tail counts the requests for the frames after the stream's last one
	// (AskTail), each try of a silence, whatever their answer; they are
	// not among the outcomes above.
	Tail uint64
	// Recovered counts the bins recovered with the device's frames: a
	// gap's, and a tail's.
	Recovered uint64
	// Ignored counts answer frames not used: outside the request answered,
	// already received, answering a request that is no longer pending
	// (the frames were processed already), or a tail that no longer
	// continues the stream.
	Ignored uint64
}

// tailAsk is the request for the frames after the stream's last one
// (AskTail), asked again with backoff until an answer comes.
type tailAsk struct {
	on      bool // a request sent, its answer not yet come
	first   int64
	count   int
	epoch   uint32    // the stream it continues
	silence time.Time // the arrival of the stream's last frame when asked: the silence it belongs to
	done    bool      // nothing more to ask in this silence: answered, or TailGiveUp passed
	tries   int       // tries in this silence, sent or not
	next    time.Time // the earliest next try
}

// request is one resend request of a gap: its frames, and whether its
// answer came.
type request struct {
	first, count int64
	answered     bool
}

// gapWait is a gap whose frames the core asked the device for: the gap,
// its requests, the frames of it received, and the frames received after
// it, held in arrival order until every answer or the deadline.
type gapWait struct {
	on           bool
	first, count int64
	reqs         [maxRequests]request
	nreq, nans   int       // requests sent, answers received
	retried      bool      // the requests without an answer asked once more (retry)
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

// newGapWait allocates a wait's storage once: MaxResendGap frames and
// flags for the gap (400 KiB a device), holdFrames for what follows it
// (448 KiB).
func newGapWait() gapWait {
	return gapWait{
		got: make([]stream.Frame, MaxResendGap), have: make([]bool, MaxResendGap),
		seqs: make([]int64, holdFrames), frames: make([]stream.Frame, holdFrames), ats: make([]time.Time, holdFrames),
	}
}

// ResendStats returns the resend counters.
func (c *Core) ResendStats() ResendStats { return c.gw.stats }

// Waiting reports whether the core waits for a gap's frames (Resent).
func (c *Core) Waiting() bool { return c.gw.on }

// Receive is FramesAt with gap recovery (Config.ResendWait and a sink
// that is a Resender): a message that leaves a gap the stream would fill,
// or a longer one (up to MaxResendGap) that wall time covers, is held,
// with what follows it, and the gap's frames are asked for; the answers
// (Resent) or the deadline (checked at each message and at Expire) end
// the wait, and the frames are then processed in order, what is missing
// of the gap going as in FramesAt (filled up to a window, a new numbering
// beyond). Decisions after a gap come late but equal to those without the
// gap, in the same stream. A zero at (untimed input) never waits. It
// allocates nothing.
func (c *Core) Receive(f *stream.Frames, backlog int64, at time.Time) {
	w := &c.gw
	for w.on { // a release may wait again, for a gap inside the frames held (chain)
		if !at.IsZero() && w.nh+len(f.Frames) <= holdFrames && (at.Before(w.until) || c.retry(at)) {
			w.hold(f, at)
			return
		}
		c.release(backlog+int64(len(f.Frames)), at)
	}
	if c.ask(f, at) {
		w.hold(f, at)
		return
	}
	c.FramesAt(f, backlog, at)
}

// ask starts a wait when f's first frame continues the current stream
// after a gap that FramesAt would fill, or after a longer gap (up to
// MaxResendGap) that the wall-time rule allows (wallBins), and asks the
// sink for the gap's frames, stream.MaxResendFrames per request, in
// order; it reports whether the core now waits. A gap that wall time
// does not cover is never asked for: it stays a new numbering.
func (c *Core) ask(f *stream.Frames, at time.Time) bool {
	if c.resender == nil || c.cfg.ResendWait <= 0 || at.IsZero() || !c.started || c.cand.n > 0 ||
		(c.resetAt >= 0 && f.FirstSeq >= c.resetAt) {
		return false
	}
	gap := f.FirstSeq - c.last - 1
	if gap < 1 || gap > MaxResendGap {
		return false
	}
	c.at = at // the wall-time rule judges the gap at this message's arrival
	if gap > c.allowedGap() && (!c.timed() || gap > c.wallBins()) {
		return false
	}
	w := &c.gw
	w.nreq, w.nans = 0, 0
	for first := c.last + 1; first <= c.last+gap; first += stream.MaxResendFrames {
		count := min(stream.MaxResendFrames, c.last+gap+1-first)
		r := &w.reqs[w.nreq]
		r.first, r.count, r.answered = first, count, false
		w.nreq++
		if !c.resender.Resend(first, int(count)) {
			if w.nreq == 1 {
				w.stats.None++
				return false
			}
			r.answered = true // no frame will come: the gap is not whole
			w.nans++
		}
	}
	if gap > rgc.WindowBins {
		w.stats.Long++
	}
	w.on, w.first, w.count, w.at, w.until, w.n, w.nh, w.retried = true, c.last+1, gap, at, at.Add(c.cfg.ResendWait), 0, 0, false
	return true
}

// retry asks once more, when the wait's deadline passed by at, for the
// gap's frames of the requests that got no answer (a request or its
// answer lost in a connection that died, a device's answer queued behind
// a burst), and the wait goes on for Config.ResendWait from at; it
// reports whether the wait goes on. A wait is extended once: filling a
// gap on one replica only (its request lost) makes the replicas differ.
func (c *Core) retry(at time.Time) bool {
	w := &c.gw
	if w.retried {
		return false
	}
	w.retried = true
	sent := false
	for i := range w.nreq {
		r := &w.reqs[i]
		if r.answered {
			continue
		}
		if c.resender.Resend(r.first, int(r.count)) {
			sent = true
			continue
		}
		r.answered = true // not sent: no frame will come
		w.nans++
	}
	if !sent {
		return false
	}
	w.until = at.Add(c.cfg.ResendWait)
	return true
}

// hold keeps f's frames, arrived at at, until the wait ends.
func (w *gapWait) hold(f *stream.Frames, at time.Time) {
	for i := range f.Frames {
		w.seqs[w.nh], w.frames[w.nh], w.ats[w.nh] = f.FirstSeq+int64(i), f.Frames[i], at
		w.nh++
	}
}

// Resent gives the core the device's answer, arrived at at, to its
// request for frames first .. first+count-1 (Resender.Resend): the frames
// it resent, empty when it keeps none of them, nil when no device
// answered (NATS "no responders"). For a gap, the request's frames among
// them are kept, the rest ignored and counted; once every request of the
// gap is answered (nil included), the gap's frames are spliced in and the
// held frames processed. A tail's frames continue the stream at once
// (resentTail); an answer with fewer frames than asked (or none) ends the
// tail's requests for this silence, a full one that continued the stream
// has the frames after it asked for at once, and after nil (the device
// out of reach, say behind a partition) the tail is asked again. An
// answer to a request no longer pending is ignored. It allocates nothing.
func (c *Core) Resent(first int64, count int, f *stream.Frames, at time.Time) {
	w := &c.gw
	n := 0
	if f != nil {
		n = len(f.Frames)
	}
	t := &c.tail
	tail := c.Tailing(first, count)
	if tail && f != nil {
		t.on, t.done = false, true
	}
	r := w.pending(first, int64(count))
	if r == nil {
		if tail {
			last := c.last
			c.resentTail(f, at)
			if n == count && c.last > last {
				t.done, t.next = false, time.Time{} // a full answer: the device may keep more, asked for at once
			}
			return
		}
		if f == nil {
			return // no device answered a request no longer pending
		}
		w.stats.Ignored += uint64(n)
		return
	}
	r.answered = true
	w.nans++
	for i := range n {
		s := f.FirstSeq + int64(i)
		k := s - w.first
		if s < r.first || s >= r.first+r.count || w.have[k] {
			w.stats.Ignored++
			continue
		}
		w.got[k], w.have[k] = f.Frames[i], true
		w.n++
	}
	if w.nans == w.nreq {
		c.release(0, at)
	}
}

// pending returns the unanswered request of the current wait for frames
// first .. first+count-1, nil if none.
func (w *gapWait) pending(first, count int64) *request {
	if !w.on {
		return nil
	}
	for i := range w.nreq {
		if r := &w.reqs[i]; !r.answered && r.first == first && r.count == count {
			return r
		}
	}
	return nil
}

// received returns the number of frames of request r received.
func (w *gapWait) received(r *request) int64 {
	n := int64(0)
	for k := r.first - w.first; k < r.first-w.first+r.count; k++ {
		if w.have[k] {
			n++
		}
	}
	return n
}

// countOutcomes tallies each request of the wait by its outcome:
// answered with every frame, some, none, or not answered (a timeout).
func (w *gapWait) countOutcomes() {
	for i := range w.nreq {
		r := &w.reqs[i]
		switch n := w.received(r); {
		case !r.answered:
			w.stats.Timeout++
		case n == r.count:
			w.stats.Answered++
		case n > 0:
			w.stats.Partial++
		default:
			w.stats.None++
		}
	}
}

// Expire ends a wait whose deadline passed by now (call it between
// messages when nothing arrives, from the goroutine feeding the core),
// after asking once more for what got no answer (retry).
func (c *Core) Expire(now time.Time) {
	if c.gw.on && !now.Before(c.gw.until) && !c.retry(now) {
		c.release(0, now)
	}
}

// Asked tells the core that the requests of its current wait went out at
// now (the caller's clock): the wait then lasts Config.ResendWait from now
// when that ends later than from the arrival of the frame after the gap.
// A processor behind a burst of queued frames (after a reconnect) sends
// its requests late; counted from the arrival, its wait would end before
// the answer could come, at a point that differs between replicas. A
// caller that sends the requests only after a reconnect calls it then.
func (c *Core) Asked(now time.Time) {
	if w := &c.gw; w.on && now.Add(c.cfg.ResendWait).After(w.until) {
		w.until = now.Add(c.cfg.ResendWait)
	}
}

// Wants reports whether the core still waits for the answer to a request
// for frames first .. first+count-1: a gap's request not yet answered, or
// the current tail request. A caller holding requests back while its
// connection is down sends only these once it is back.
func (c *Core) Wants(first int64, count int) bool {
	t := &c.tail
	return c.gw.pending(first, int64(count)) != nil || (t.on && t.first == first && t.count == count)
}

// EndWait ends a wait at once, filling what is missing of the gap; call
// it before a control message, which applies after the frames received
// before it.
func (c *Core) EndWait() {
	if c.gw.on {
		c.release(0, time.Time{})
	}
}

// drop forgets a wait and its frames (a restored state supersedes what
// this core received; a standby replays its own retained messages).
func (w *gapWait) drop() {
	if !w.on {
		return
	}
	w.countOutcomes()
	w.on, w.n, w.nh = false, 0, 0
	clear(w.have)
}

// release ends the wait: the gap's frames received are processed (at
// the arrival of the frame after the gap; FramesAt fills what is missing
// of a gap it would fill, and holds the frames after a longer hole as a
// new numbering), then the held frames in order. backlog frames more
// wait behind them. The frames not yet processed count as received for
// the overload policy (Config.MaxLag), as frames queued do. Resent frames
// do not show the current stream alive (aliveAt): they were asked for.
// A gap inside the held frames (lost within a burst) starts a new wait at
// now (chain), unless now is zero (a control message waits for nothing).
func (c *Core) release(backlog int64, now time.Time) {
	w := &c.gw
	w.countOutcomes()
	w.on = false
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
		c.resending = true
		c.FramesAt(&w.view, backlog+w.left, w.at)
		c.resending = false
		i = j
	}
	for i := 0; i < w.nh; {
		if i > 0 && !now.IsZero() && w.seqs[i] > c.last+1 && c.chain(i, now) {
			return
		}
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

// chain starts a new wait, at now, for the gap before held frame i (frames
// lost inside those held, as a slow consumer drops them in the burst after
// a reconnect), keeping held frames i.. for it, and reports whether the
// core waits again; otherwise the gap goes as without resend.
func (c *Core) chain(i int, now time.Time) bool {
	w := &c.gw
	held := w.nh // ask starts a wait with nothing held
	w.view.FirstSeq, w.view.Frames = w.seqs[i], w.frames[i:i+1]
	if !c.ask(&w.view, w.ats[i]) {
		return false
	}
	nh := copy(w.seqs, w.seqs[i:held])
	copy(w.frames, w.frames[i:held])
	copy(w.ats, w.ats[i:held])
	w.nh, w.left, w.view.Frames = nh, 0, nil
	if until := now.Add(c.cfg.ResendWait); until.After(w.until) {
		w.until = until
	}
	return true
}

// AskTail asks the device for the frames after the stream's last one,
// when no frame arrived for TailAfter by now (call it from the goroutine
// feeding the core when nothing arrives). Frames that reach one replica
// only (its peer's subscription was not back, a node died, the device
// paused or stopped) show no gap to the other, since no frame follows
// them; this request does. It asks for up to stream.MaxResendFrames frames
// from the last one on (before a pending reset's frame), with no frame
// held and no wait: the answer continues the stream whenever it comes
// (Resent). A request that got no answer (lost in a cut, no device
// reachable, or not sent while the connection was down) is asked again
// TailAfter later, then at doubling pauses up to tailBackoffMax, or at
// once after a reconnect (Reconnected), until TailGiveUp of silence; an
// answer with fewer frames than asked, even an empty one, ends the
// silence's requests, and a full one has the next frames asked for at
// once (a silence longer than a request, up to the device's ring). It
// asks nothing without resend or a running stream, nor while a gap's
// frames or a candidate numbering are pending; a new silence starts only
// after a frame of the stream arrived (resent ones do not count). It
// reports whether a request went out.
func (c *Core) AskTail(now time.Time) bool {
	t := &c.tail
	if c.resender == nil || now.IsZero() || !c.started || c.gw.on || c.cand.n > 0 || c.aliveAt.IsZero() ||
		now.Sub(c.aliveAt) < TailAfter {
		return false
	}
	if !t.silence.Equal(c.aliveAt) {
		t.silence, t.on, t.done, t.tries, t.next = c.aliveAt, false, false, 0, now
	}
	if t.done || now.Before(t.next) {
		return false
	}
	if now.Sub(c.aliveAt) > TailGiveUp {
		t.done = true
		return false
	}
	first := c.last + 1
	count := min(int64(stream.MaxResendFrames), stream.MaxSeq-first+1)
	if c.resetAt >= 0 {
		count = min(count, c.resetAt-first) // the frames from resetAt on are the next stream's
	}
	if count < 1 {
		t.done = true
		return false
	}
	t.tries++
	t.next = now.Add(min(TailAfter<<min(t.tries-1, 8), tailBackoffMax))
	if !c.resender.Resend(first, int(count)) {
		return false
	}
	t.on, t.first, t.count, t.epoch = true, first, int(count), c.epoch
	c.gw.stats.Tail++
	return true
}

// Reconnected tells the core that its connection to the server came back
// (a cut healed by closing it, a node restarted): a tail request of the
// current silence that got no answer went, most likely, into the dead
// connection, so AskTail asks again at its next call, whatever the
// backoff.
func (c *Core) Reconnected() { c.tail.next = time.Time{} }

// Tailing reports whether an answer to the request for count frames from
// first answers the pending tail request (AskTail): frames this replica
// missed live, at the stream's end.
func (c *Core) Tailing(first int64, count int) bool {
	t := &c.tail
	return t.on && t.first == first && t.count == count
}

// resentTail continues the stream with a tail's frames (AskTail), arrived
// at at: those after the last one processed, when they continue it
// without a hole, go as a live message's would (the wall-time rule dates
// them at their arrival, late, so their nominal dates stand), except that
// they do not show the stream alive. The tail is ignored and counted when
// the stream it was asked in ended, a gap's frames or a candidate
// numbering are pending (their own rules decide), or it does not reach
// the frame after the last one.
func (c *Core) resentTail(f *stream.Frames, at time.Time) {
	w := &c.gw
	if f == nil || len(f.Frames) == 0 {
		return
	}
	n := int64(len(f.Frames))
	skip := c.last + 1 - f.FirstSeq
	if !c.started || c.epoch != c.tail.epoch || w.on || c.cand.n > 0 || skip < 0 || skip >= n {
		w.stats.Ignored += uint64(n)
		return
	}
	w.stats.Ignored += uint64(skip)
	w.stats.Recovered += uint64(n - skip)
	w.view.FirstSeq, w.view.Frames = c.last+1, f.Frames[skip:]
	c.resending = true
	c.FramesAt(&w.view, 0, at)
	c.resending = false
	w.view.Frames = nil
}
