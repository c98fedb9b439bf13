package standby

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/stream"
)

// BreakMargin is how long before the arrival of the last frames before a
// gap the messages an instance published count as possibly lost with the
// frames: a link that swallows the device's frames (a route cut between
// two NATS nodes, a node partitioned from the others) swallows the
// decisions going the other way too, from about when the last frames
// came through.
const BreakMargin = 250 * time.Millisecond

// breakMarks is how many frames messages a replica remembers (about a
// second of a real-time stream's messages).
const breakMarks = 1024

// breakMark is the gate's state when a frames message arrived.
type breakMark struct {
	at        int64      // arrival (Unix ns)
	pos       stream.Pos // the last position published or observed then
	seen      bool       // whether there was one
	published uint64     // how many messages this instance had published then
}

// breaks finds the gaps in a device's frames and tells which of the
// messages published around them to send again. Processor goroutine only;
// a fixed ring, nothing allocated per message.
type breaks struct {
	marks   [breakMarks]breakMark
	head, n int
	next    int64 // the frame after the last one seen
	started bool
	copies  atomic.Uint64 // messages published again after gaps (read by any goroutine)
}

// arrived records a frames message of frames first..last that arrived at
// at, with the gate's state before it (the last position published or
// observed, and this instance's publish count). At a gap (first beyond
// the frame after the previous message's last), if this instance
// published anything since BreakMargin before the previous message
// arrived, it reports the position after which every kept message is to
// be published again: the last one then, or the start of the current
// epoch if that is later (no mark that old, or a reset since: the device
// wants nothing of the stream before it). missed says the frames were
// missed live and came through a resend (a silent stream's tail): a gap
// even when they continue the frames seen.
func (b *breaks) arrived(at time.Time, first, last int64, pos stream.Pos, seen bool, published uint64, missed bool) (from stream.Pos, again bool) {
	gap := b.started && (first > b.next || missed) && b.n > 0
	if gap {
		prev := b.mark(b.n - 1).at
		m := b.mark(0) // the oldest, unless one is old enough
		for i := b.n - 1; i >= 0; i-- {
			if c := b.mark(i); c.at <= prev-int64(BreakMargin) {
				m = c
				break
			}
		}
		if published > m.published {
			from, again = m.pos, true
			if !m.seen || m.pos.Epoch != pos.Epoch {
				from = stream.Pos{Epoch: pos.Epoch, Bin: stream.EventBin, Index: math.MinInt32}
			}
		}
	}
	b.started, b.next = true, last+1
	if b.n == breakMarks {
		b.head = (b.head + 1) % breakMarks
		b.n--
	}
	b.marks[(b.head+b.n)%breakMarks] = breakMark{at: at.UnixNano(), pos: pos, seen: seen, published: published}
	b.n++
	return from, again
}

// mark returns the i-th oldest mark.
func (b *breaks) mark(i int) breakMark { return b.marks[(b.head+i)%breakMarks] }

// Arrived tells the replica of a frames message of frames first..last,
// received at at, before the core processes it (processor goroutine).
// After a gap in the device's frames, the decisions messages this
// instance published from BreakMargin before the last frames came
// through, and every kept one after, are published again (Rgc-Copy) on
// the device's subject, before anything the frames after the gap produce:
// whatever link lost the frames may have lost them on their way to the
// device, whose connection did not break (so it asks for nothing), while
// their echo came back to this instance from its own server. A device
// that has them drops the copies (stream.Fence); one that missed them
// takes them, since nothing later reached it.
func (r *Replica) Arrived(at time.Time, first, last int64) { r.arrived(at, first, last, false) }

// Recovered tells the replica of frames first..last that it missed live
// and got from the device's answer to a tail request (processor
// goroutine, before the core processes them). They count as a gap for
// Arrived's rule: a link that lost the stream's last frames on their way
// here may have lost this instance's decisions on their way to the
// device, and no later live frame shows a gap. Frames behind the last
// seen (a gap's answer) were a gap already and change nothing.
func (r *Replica) Recovered(at time.Time, first, last int64) {
	if !r.breaks.started || first < r.breaks.next {
		return
	}
	r.arrived(at, first, last, true)
}

// arrived applies Arrived's rule; missed forces a gap (Recovered).
func (r *Replica) arrived(at time.Time, first, last int64, missed bool) {
	pos, seen := r.gate.Observed()
	from, again := r.breaks.arrived(at, first, last, pos, seen, r.gate.Stats().Published, missed)
	if !again {
		return
	}
	n := r.resend.again(from)
	r.breaks.copies.Add(uint64(n))
	r.group.cfg.Log.Info().Str("device", r.name).Int64("first_seq", first).Int("messages", n).
		Msg("standby: a gap in the device's frames: published again what this instance sent just before it (the link may have lost it)")
}

// GapCopies counts the decisions messages published again after gaps in
// the device's frames (Arrived).
func (r *Replica) GapCopies() uint64 { return r.breaks.copies.Load() }

// again publishes every kept message after p again, as copies, in
// position order, and returns how many went out (processor goroutine).
func (r *resender) again(p stream.Pos) int {
	r.againBuf, _ = r.sent.after(r.againBuf[:0], p)
	n := 0
	for i, c := range r.againBuf {
		if publishCopy(r.nc, c) == nil {
			n++
		}
		r.againBuf[i] = nil
	}
	return n
}

// publishCopy publishes a kept message again, unchanged (its original
// headers, lease revision and authenticator) but for Rgc-Copy: 1.
func publishCopy(nc *nats.Conn, c *nats.Msg) error {
	h := make(nats.Header, len(c.Header)+1)
	for k, v := range c.Header {
		h[k] = v
	}
	h.Set(stream.CopyHeader, "1")
	return nc.PublishMsg(&nats.Msg{Subject: c.Subject, Header: h, Data: c.Data})
}
