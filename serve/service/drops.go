package service

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/stream"
)

// dropKey is what a drop notice is about.
type dropKey struct {
	kind   uint8
	reason string
}

// dropNotices gathers a device's refused messages until they are told to
// it: the first refusal at once, later ones at most every dropNoticeEvery.
type dropNotices struct {
	mu      sync.Mutex
	pending map[dropKey]uint64
	armed   bool // a tick is due
	msg     nats.Msg
	buf     []byte
}

// notifyDrop tells the device, on its events subject, that n messages (or
// frames) it sent on kind's subject were refused for reason (stream.Drop).
func (d *device) notifyDrop(kind uint8, reason string, n uint64) {
	q := &d.drops
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = map[dropKey]uint64{}
	}
	q.pending[dropKey{kind, reason}] += n
	if q.armed {
		return
	}
	d.flushDrops()
	q.armed = true
	time.AfterFunc(dropNoticeEvery, d.dropTick)
}

// dropTick sends the notices gathered since the last ones.
func (d *device) dropTick() {
	q := &d.drops
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.armed = false
		return
	}
	d.flushDrops()
	time.AfterFunc(dropNoticeEvery, d.dropTick)
}

// flushDrops publishes a notice per pending kind and reason, signed with
// the device's Down key when keys are configured. The caller holds
// d.drops.mu. A notice that cannot be published is counted as a publish
// error; the device learns of it from the next one.
func (d *device) flushDrops() {
	q := &d.drops
	nc := d.nc
	for k, n := range q.pending {
		delete(q.pending, k)
		if nc == nil {
			continue
		}
		b, err := stream.AppendDrop(q.buf[:0], &stream.Drop{Kind: k.kind, Count: n, Reason: k.reason})
		if err != nil {
			continue // a reason no notice can carry (not [a-z_])
		}
		q.buf = b
		q.msg.Subject, q.msg.Data, q.msg.Header = d.eventSubj, b, nil
		if d.down != nil {
			d.down.Sign(&q.msg)
		}
		if err := nc.PublishMsg(&q.msg); err != nil {
			d.sink.pubErr.Inc()
		}
	}
}
