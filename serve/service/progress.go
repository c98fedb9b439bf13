package service

import (
	"sync/atomic"
	"time"
)

// progress tells whether a device's processor is moving: the processor
// marks when it began a message and each model call it finished within
// it; the lease's goroutine asks whether the last mark is older than a
// TTL. So a message that takes many model calls (a long gap's catch-up:
// thousands of bins in one message) keeps the lease, and one stuck in a
// single call (a wedged engine) or a stopped process does not.
type progress struct {
	at atomic.Int64 // the last mark (Unix ns), 0 between messages
}

// begin marks the start of a message (processor goroutine).
func (p *progress) begin(now time.Time) { p.at.Store(now.UnixNano()) }

// step marks a model call finished within the message, if one is being
// handled (processor goroutine): calls outside a message (a timer's
// expiry) leave it idle.
func (p *progress) step(now time.Time) {
	if p.at.Load() != 0 {
		p.at.Store(now.UnixNano())
	}
}

// end marks the processor idle between messages (processor goroutine).
func (p *progress) end() { p.at.Store(0) }

// busy reports whether the processor is inside a message.
func (p *progress) busy() bool { return p.at.Load() != 0 }

// stalled reports whether the processor has been inside a message for
// longer than ttl without finishing a model call (any goroutine).
func (p *progress) stalled(now time.Time, ttl time.Duration) bool {
	t := p.at.Load()
	return t != 0 && now.UnixNano()-t > int64(ttl)
}
