package daemon

import (
	"time"

	"rgcpred/rgc"
	"rgcpred/stream"
)

// Frames processes a decoded frames message. backlog is the number of
// frames received after this message and not yet given to the core (it
// drives the overload policy; 0 when there is no backlog). It allocates
// nothing.
func (c *Core) Frames(f *stream.Frames, backlog int64) {
	c.FramesAt(f, backlog, time.Time{})
}

// FramesAt is Frames for a message that arrived at at: with
// Config.BinPeriod set and at not zero, the numbering rules consult wall
// time (a forward gap is believed only as far as the wall time the stream
// has not used allows, counted from its last bin's date on its earliest
// schedule, allowedGap; a new numbering only after the current stream was
// silent for Config.ConfirmWait). A zero at applies the rules without wall
// time (offline replays and audits of untimed input) and dates nothing.
func (c *Core) FramesAt(f *stream.Frames, backlog int64, at time.Time) {
	c.backlog = backlog
	c.at = at
	n := int64(len(f.Frames))
	for i := range f.Frames {
		c.frame(f.FirstSeq+int64(i), &f.Frames[i], n-1-int64(i))
	}
	c.expect()
}

// frame routes frame seq (rem more frames follow it in its message): to
// the current stream, to the candidate numbering, or to a new stream.
func (c *Core) frame(seq int64, fr *stream.Frame, rem int64) {
	if c.resetAt >= 0 && seq >= c.resetAt && seq > c.last && seq-c.last-1 <= rgc.WindowBins {
		c.reset() // the reset at this frame (OpResetAt): the frame starts the next stream
	}
	switch {
	case !c.started:
		c.start(seq, c.reason)
	case seq <= c.last && c.last-seq < rgc.WindowBins:
		c.dropCandidate() // the current stream is alive
		if !c.resending {
			c.aliveAt = c.at
		}
		c.stats.Stale++
		return
	case seq <= c.last || seq-c.last-1 > c.allowedGap():
		c.hold(seq, fr, rem)
		return
	default:
		c.dropCandidate()
	}
	c.accept(seq, fr, rem)
}

// timed reports whether the numbering rules consult wall time for the
// message being processed.
func (c *Core) timed() bool {
	return c.cfg.BinPeriod > 0 && !c.at.IsZero() && c.sched.known()
}

// allowedGap returns the most bins a frame may skip and still continue the
// current stream at once: a window without wall time; with it, the wall
// time the stream has not used (wallBins). So the stream's clock runs
// ahead of its most on-time frame's schedule by GapSlack bins at most
// through gaps, and no message makes the core believe more time passed
// than did.
func (c *Core) allowedGap() int64 {
	if !c.timed() {
		return rgc.WindowBins
	}
	return min(rgc.WindowBins, c.wallBins())
}

// wallBins returns the bins of wall time the stream has not used: the
// time since its last bin's date on its earliest schedule (lag) plus the
// credit, at most Config.GapSlack bins of time that no gap used.
func (c *Core) wallBins() int64 { return c.credit + c.lag() }

// lag returns the bins of wall time since the stream's last bin's date.
// The date is the earliest its frames give (schedule): frames that arrive
// late, all at once after a pause, leave the lag their lateness, so the
// live frames after a drop among them continue the stream; frames that
// arrive early (a clock running ahead) date the bin at their arrival.
func (c *Core) lag() int64 { return int64(c.at.Sub(c.sched.date()) / c.cfg.BinPeriod) }

// date accounts for frame seq, accepted at the current message's arrival
// after a gap of seq-last-1 bins: the gap uses the wall time the stream
// had not used; what is left stays as the lag of the new last bin's date,
// and the rest as credit, from 0 up to Config.GapSlack. The gaps inside a
// confirmed candidate (adopt) may exceed the wall time: they leave no
// debt, so a stream restarted at a forged frame ahead of the device still
// takes the device's next frames. A frame without an arrival time dates
// nothing.
func (c *Core) date(seq int64) {
	switch {
	case c.at.IsZero() || c.cfg.BinPeriod <= 0:
		return
	case !c.sched.known():
		c.sched.restart(c.at)
		return
	}
	left := c.wallBins() - (seq - c.last - 1)
	c.sched.advance(seq-c.last, c.cfg.BinPeriod, c.at)
	c.credit = max(0, min(c.cfg.GapSlack, left-c.lag()))
}

// accept processes frame seq of the current stream, filling a gap before
// it by holding the last frame.
func (c *Core) accept(seq int64, fr *stream.Frame, rem int64) {
	c.date(seq)
	c.cur, c.rem = seq, rem
	for b := c.last + 1; b < seq; b++ {
		c.stats.GapBins++
		c.filled = b
		c.bin(b, c.held, c.heldT)
	}
	led := fr.LED
	clamped := false
	for ch, v := range led {
		if v < stream.MinIntensity {
			led[ch], clamped = stream.MinIntensity, true
		} else if v > stream.MaxIntensity {
			led[ch], clamped = stream.MaxIntensity, true
		}
	}
	if clamped {
		c.stats.Clamped++
	}
	c.stats.Frames++
	if !c.at.IsZero() && !c.resending {
		c.aliveAt = c.at
	}
	c.bin(seq, led, fr.Time)
}

// hold keeps a frame that does not continue the current stream as part of
// the candidate numbering (its last Config.ConfirmFrames frames). The
// candidate is adopted once it is confirmed (confirmed); its held frames
// are then processed in order: as the continuation of the current stream
// when its first frame is at most a window ahead of it, else as a new
// stream (a restart).
func (c *Core) hold(seq int64, fr *stream.Frame, rem int64) {
	k := &c.cand
	if k.n > 0 {
		last := k.seqs[k.n-1]
		if seq <= last || seq-last-1 > rgc.WindowBins {
			c.dropCandidate() // not a continuation of the candidate either
		}
	}
	if k.n == len(k.seqs) { // full and not yet confirmed: keep the latest frames
		copy(k.seqs, k.seqs[1:])
		copy(k.frames, k.frames[1:])
		k.n--
		c.stats.OutOfStream++
	}
	k.seqs[k.n], k.frames[k.n] = seq, *fr
	k.n++
	if c.confirmed() {
		c.adopt(rem)
	}
}

// Tick applies the numbering rules at now without a frame: a candidate
// numbering confirmed by the time passed since its last frame (the device
// stopped sending right after a jump) is adopted. Call it from the
// goroutine feeding the core, between frames, when nothing arrived for a
// while; it does nothing without Config.BinPeriod or a candidate.
func (c *Core) Tick(now time.Time) {
	if c.cand.n == 0 || now.IsZero() {
		return
	}
	c.at, c.backlog = now, 0
	if c.confirmed() {
		c.adopt(0)
		c.expect()
	}
}

// Held returns the number of frames held for a candidate numbering.
func (c *Core) Held() int { return c.cand.n }

// adopt processes the confirmed candidate's frames: as the continuation
// of the current stream when its first frame is at most a window ahead of
// it, else as a new stream (a restart). rem more frames follow the last
// one in its message.
func (c *Core) adopt(rem int64) {
	k := &c.cand
	n := k.n
	k.n = 0
	if first := k.seqs[0]; first <= c.last || first-c.last-1 > rgc.WindowBins {
		c.stats.Restarts++
		c.start(first, stream.EventRestart)
	}
	for j := range n {
		c.accept(k.seqs[j], &k.frames[j], rem+int64(n-1-j))
	}
}

// confirmed reports whether the candidate numbering is believed: it holds
// Config.ConfirmFrames frames and, with wall time, the current stream sent
// nothing for Config.ConfirmWait (a publisher that keeps sending keeps the
// device) and a forward jump is no longer than the time since its last
// frame allows.
func (c *Core) confirmed() bool {
	k := &c.cand
	if k.n < c.cfg.ConfirmFrames {
		return false
	}
	if !c.timed() {
		return true
	}
	quiet := c.at.Sub(c.aliveAt)
	if quiet < c.cfg.ConfirmWait {
		return false
	}
	first := k.seqs[0]
	return first <= c.last || first-c.last-1 <= c.wallBins()
}

// dropCandidate forgets the candidate numbering's frames, counting them.
func (c *Core) dropCandidate() {
	c.stats.OutOfStream += uint64(c.cand.n)
	c.cand.n = 0
}

// start begins a stream (a new epoch) at frame seq: every cell's first
// window ends at seq+1023 (plus its stagger offset) with its pending history
// or zeros. The sink hears of it before any decision of the new epoch.
func (c *Core) start(seq int64, reason uint8) {
	c.Flush()
	if c.started {
		c.prev = c.last
	}
	c.started = true
	c.epoch++
	c.first = seq
	c.last = seq - 1
	c.filled = -1
	c.nextDue = 0
	c.cand.n = 0
	if !c.at.IsZero() {
		c.aliveAt, c.credit = c.at, c.cfg.GapSlack
		c.sched.restart(c.at)
	}
	c.resetAt = -1 // a reset scheduled in the previous stream names its epoch
	c.sink.Stream(stream.Event{Reason: reason, Epoch: c.epoch, First: seq, PrevLast: c.prev})
	for i := range c.cells {
		c.cells[i].Reset(c.cfg.Cells[i], c.firstEnd(i), nil)
		if c.pending[i].has {
			c.applyHistory(i, &c.pending[i].spikes)
			c.pending[i].has = false
		}
	}
}

// firstEnd returns the end bin of cell i's first window in the current
// stream.
func (c *Core) firstEnd(i int) int {
	return int(c.first) + rgc.WindowBins - 1 + c.offset[i]
}

// StartOffset returns the stagger offset of a served cell: its first window
// ends this many bins after first + 1023 (0 without Config.Stagger).
func (c *Core) StartOffset(cell int) (int, bool) {
	i, ok := c.index[cell]
	if !ok {
		return 0, false
	}
	return c.offset[i], true
}

func (c *Core) applyHistory(i int, spikes *[rgc.WindowBins]bool) {
	c.nextDue = 0
	t0 := c.firstEnd(i)
	c.cells[i].ResetRow(c.cfg.Cells[i], t0, spikes)
}

// bin processes bin b: store its stimulus, then predict every cell whose
// window ends at b.
func (c *Core) bin(b int64, led [rgc.StimChannels]float32, ts int64) {
	s := int(b & (ringBins - 1))
	for ch := range led {
		c.stim[ch][s] = led[ch]
	}
	c.times[s], c.filledAt[s] = ts, c.filled
	if c.winEnd == b {
		c.winEnd = -1 // a restarted stream reuses the bin number
	}
	c.last, c.held, c.heldT = b, led, ts
	if b < c.first+rgc.WindowBins-1 || b < c.nextDue {
		return
	}
	c.due = c.due[:0]
	for i := range c.cells {
		if int64(c.cells[i].Next) == b {
			c.due = append(c.due, i)
		}
	}
	if len(c.due) > 0 && c.stale(b) {
		c.Flush() // older gathered windows first (they are stale too)
		c.skip(c.due, b, ts, c.flagsAt(b))
		c.updateNextDue()
		return
	}
	for _, i := range c.due {
		if len(c.gath) == c.cfg.MaxBatch {
			c.Flush()
		}
		c.gather(i, b)
	}
	switch {
	case len(c.gath) > 0 && (len(c.gath) >= c.cfg.Gather || c.waiting() == 0 || b-c.gath[0].b >= MaxGatherBins):
		c.Flush() // updates nextDue
	case c.nextDue == 0:
		// Only decisions move a cell's next window (Flush, skip), so
		// nextDue needs work only after a (re)start cleared it.
		c.updateNextDue()
	}
}

// flagsAt returns the decision flags of the window ending at bin b of the
// ring: FlagFilled when it holds a gap-filled bin.
func (c *Core) flagsAt(b int64) uint8 {
	if c.filledAt[b&(ringBins-1)] > b-rgc.WindowBins {
		return stream.FlagFilled
	}
	return 0
}

// waiting returns the number of frames received and not yet processed
// after the current one: the rest of its message and the backlog
// (Config.Backlog, else the one passed to Frames).
func (c *Core) waiting() int64 {
	backlog := c.backlog
	if c.cfg.Backlog != nil {
		backlog = c.cfg.Backlog()
	}
	return c.rem + max(backlog, 0)
}

// stale reports whether decisions due at bin b are too late to matter: the
// core is more than MaxLag bins behind the receive edge (Config.MaxLag).
func (c *Core) stale(b int64) bool {
	if c.cfg.MaxLag <= 0 {
		return false
	}
	return c.cur-b+c.waiting() > c.cfg.MaxLag
}

// Control applies a control message: a reset, a reset at a frame
// (OpResetAt: due before the first frame of its epoch at or past its seq;
// the earliest of several of one epoch applies, the others find their
// epoch over), or initial histories.
func (c *Core) Control(m *stream.Control) {
	c.Flush() // windows due before the message are decided as they were
	switch m.Op {
	case stream.OpReset:
		c.reset()
	case stream.OpResetAt:
		switch {
		case !c.started || m.Epoch != c.epoch:
			c.stats.ResetsStale++
		case m.At <= c.last:
			c.stats.ResetsLate++
			c.reset()
		case c.resetAt < 0 || m.At < c.resetAt:
			c.resetAt = m.At
		}
	case stream.OpHistory:
		for hi := range m.Histories {
			h := &m.Histories[hi]
			i, ok := c.index[int(h.Cell)]
			if !ok {
				if !c.known[int(h.Cell)] {
					c.stats.UnknownCell++
				}
				continue // another shard's cell
			}
			switch {
			case !c.started:
				c.pending[i] = pending{has: true, spikes: h.Spikes}
			case c.last < int64(c.firstEnd(i)):
				c.applyHistory(i, &h.Spikes)
			default:
				c.stats.HistoryLate++
				continue
			}
			c.stats.Histories++
		}
	}
}

// reset ends the stream: the stimulus ring, every cell's state and every
// history received so far are forgotten; the next frame starts a new
// stream (stream.EventReset).
func (c *Core) reset() {
	c.Flush()
	c.stats.Resets++
	if c.started {
		c.prev = c.last
	}
	c.started = false
	c.last = -1
	c.reason = stream.EventReset
	c.resetAt = -1
	c.dropCandidate()
	for i := range c.pending {
		c.pending[i].has = false
	}
}
