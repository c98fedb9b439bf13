package standby

import "rgcpred/stream"

// held is a message a gate keeps: a standby's until the holder's copy is
// observed, a holder's until its echo comes back from the server.
type held struct {
	pos     stream.Pos
	rev     uint64 // the lease revision it went out with (echo ring only)
	subject string
	data    []byte
}

// heldRing is a bounded FIFO of held messages in position order. Each
// slot reuses its payload buffer: once the buffers have grown, keeping a
// message allocates nothing. Not safe for concurrent use (the gate's
// mutex guards it).
type heldRing struct {
	buf     []held
	head, n int
	bytes   int // payload bytes of the messages kept
}

func newHeldRing(capacity int) heldRing { return heldRing{buf: make([]held, capacity)} }

// full reports whether the ring holds as many messages as it can.
func (r *heldRing) full() bool { return r.n == len(r.buf) }

// at returns the i-th oldest message (0: the oldest).
func (r *heldRing) at(i int) *held { return &r.buf[(r.head+i)%len(r.buf)] }

// pop drops the oldest message.
func (r *heldRing) pop() {
	r.bytes -= len(r.buf[r.head].data)
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// push keeps a copy of a message after the others; the ring must not be
// full.
func (r *heldRing) push(subject string, pos stream.Pos, rev uint64, data []byte) {
	h := r.at(r.n)
	h.pos, h.rev, h.subject, h.data = pos, rev, subject, append(h.data[:0], data...)
	r.n++
	r.bytes += len(data)
}

// popTo drops the messages at or before pos and returns how many.
func (r *heldRing) popTo(pos stream.Pos) int {
	k := 0
	for r.n > 0 && !pos.Less(r.at(0).pos) {
		r.pop()
		k++
	}
	return k
}

// clear drops every message and returns how many there were.
func (r *heldRing) clear() int {
	k := r.n
	r.head, r.n, r.bytes = 0, 0, 0
	return k
}
