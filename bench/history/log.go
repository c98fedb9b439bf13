// Package history records what a device received from a predictord group
// and what each holder published, and checks the record against the
// undisturbed offline rollout (package rollout): each (cell, window end)
// decided exactly once, equal to the rollout's decision, nothing from
// before the device's reset after it; and the replicas' final states
// byte-identical. It is the verdict of a replay (cmd/replay) and of each
// nemesis schedule (bench/nemesis).
package history

import (
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"rgcpred/stream"
)

// Log is the history of one replay: the decisions the device took (after
// its fence) and every decisions message published on its subject,
// attributed to the lease revision of its publisher. It is safe for
// concurrent use.
type Log struct {
	mu        sync.Mutex
	received  []stream.Decision
	published map[uint64]int64
	bad       int64
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{published: map[uint64]int64{}} }

// Receive records the decisions the device took from one message.
func (l *Log) Receive(ds []stream.Decision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.received = append(l.received, ds...)
}

// Publish records a decisions message seen on the device's subject before
// the device's fence: its decisions are counted for its publisher's lease
// revision. A payload that does not decode is counted as bad.
func (l *Log) Publish(m *nats.Msg) {
	var d stream.Decisions
	err := stream.DecodeDecisions(m.Data, &d)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.bad++
		return
	}
	l.published[LeaseOf(m.Header)] += int64(len(d.Decisions))
}

// LeaseOf returns the lease revision a message's headers carry (0: none or
// unreadable).
func LeaseOf(h nats.Header) uint64 {
	if h == nil {
		return 0
	}
	r, err := strconv.ParseUint(h.Get(stream.LeaseHeader), 10, 64)
	if err != nil {
		return 0
	}
	return r
}

// Received returns a copy of the decisions taken so far, in arrival order.
func (l *Log) Received() []stream.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]stream.Decision(nil), l.received...)
}

// Published returns the decisions published per lease revision so far and
// the number of messages that did not decode.
func (l *Log) Published() (byLease map[uint64]int64, bad int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[uint64]int64, len(l.published))
	for k, v := range l.published {
		out[k] = v
	}
	return out, l.bad
}
