package stream

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// SpikesResendSubject is the subject on which a device asks a hot-standby
// group's holder to publish again the decisions messages it missed while
// its subscription was not back (docs/protocol.md, "Decisions resend").
func SpikesResendSubject(device string) string { return "rgc." + device + ".spikes.resend" }

// Headers of a decisions resend's copies and answer (docs/protocol.md,
// "Decisions resend").
const (
	// ResentHeader carries how many messages the holder published again
	// (a decimal number).
	ResentHeader = "Rgc-Resent"
	// CopyHeader marks a message published again ("1"): the device's
	// decision subscription holds what it takes until the last copy
	// came. It is not signed: a forged one only ends the hold early.
	CopyHeader = "Rgc-Copy"
	// ResentToHeader carries the position of the last message published
	// again (absent when none).
	ResentToHeader = "Rgc-Resent-To"
	// ResendGapHeader is "1" when the holder no longer keeps every message
	// after the requested position: some are lost.
	ResendGapHeader = "Rgc-Resend-Gap"
	// ResendRefusedHeader carries the reason a request was refused
	// (auth_missing, auth_invalid, replayed, malformed, limited).
	ResendRefusedHeader = "Rgc-Resend-Refused"
)

// Timing of a decisions resend. The device asks after each reconnect,
// once its subscription is registered (a Flush), each try waiting
// ResendTimeout for the answer, until one answers or ResendTries were
// made (a group electing its holder answers nothing for a while). Its
// fence takes the copies until ResendWindow after the answer.
const (
	ResendTimeout = 500 * time.Millisecond
	ResendTries   = 20
	ResendWindow  = 2 * time.Second
)

// resendSpan bounds the tries of one request: each waits ResendTimeout,
// then half as long before the next.
const resendSpan = ResendTries * (ResendTimeout + ResendTimeout/2)

// ResendStats counts a Publisher's decisions resend requests. Every field
// only grows.
type ResendStats struct {
	// Requests counts requests sent (each try).
	Requests uint64
	// Answered counts requests a holder answered; Refused those it
	// refused (ResendRefusedHeader); Unanswered those that got no answer
	// after every try.
	Answered, Refused, Unanswered uint64
	// Announced sums the holders' ResentHeader counts.
	Announced uint64
	// Gaps counts answers with ResendGapHeader: decisions lost.
	Gaps uint64
}

// resendCounters are a Publisher's ResendStats.
type resendCounters struct {
	requests, answered, refused, unanswered, announced, gaps atomic.Uint64
}

// SpikesResent returns the counters of the decisions resend requests the
// publisher's decision subscriptions sent.
func (p *Publisher) SpikesResent() ResendStats {
	c := &p.spikesResend
	return ResendStats{Requests: c.requests.Load(), Answered: c.answered.Load(), Refused: c.refused.Load(),
		Unanswered: c.unanswered.Load(), Announced: c.announced.Load(), Gaps: c.gaps.Load()}
}

// reconnects returns how often the publisher's connection reconnected.
func (p *Publisher) reconnects() uint64 { return p.nc.Stats().Reconnects }

// watchReconnects asks, after each reconnect of the publisher's
// connection, for the decisions messages f's groups published while sub
// was not back, until sub is closed.
func (p *Publisher) watchReconnects(sub *nats.Subscription, f *Fence, h *resendHold) {
	conn := p.nc.StatusChanged(nats.CONNECTED)
	closed := sub.StatusChanged(nats.SubscriptionClosed)
	go func() {
		defer p.nc.RemoveStatusListener(conn)
		for {
			select {
			case <-closed:
				return
			case _, ok := <-conn:
				if !ok {
					return
				}
				h.mu.Lock()
				h.begin(f.lost(p.reconnects(), time.Now()))
				h.mu.Unlock()
				p.resendSpikes(closed, f, h)
			}
		}
	}()
}

// resendSpikes sends f's resend requests once the subscription is
// registered again: the request then travels behind the subscription's
// interest, so whatever the holder publishes after it read the request
// reaches the device.
func (p *Publisher) resendSpikes(closed <-chan nats.SubStatus, f *Fence, h *resendHold) {
	ctx, cancel := context.WithTimeout(context.Background(), resendSpan)
	defer cancel()
	if err := p.nc.FlushWithContext(ctx); err != nil {
		f.closeWindows()
		return // disconnected again: the next reconnect asks
	}
	for _, r := range f.resendFrom(time.Now().Add(resendSpan + ResendWindow)) {
		to, hasTo, ok := p.requestResend(closed, r)
		if ok {
			f.closeAt(r.group, time.Now().Add(ResendWindow)) // the copies went out before the answer
		}
		h.answered(r.group, to, hasTo)
	}
}

// requestResend asks the holder of r.group for the messages after r.after,
// trying until one answers or ResendTries were made. It reports whether
// the holder answered with its copies (ok), and the last copy's position
// (hasTo: there were copies).
func (p *Publisher) requestResend(closed <-chan nats.SubStatus, r resendAt) (to Pos, hasTo, ok bool) {
	for try := 0; try < ResendTries; try++ {
		m := &nats.Msg{Subject: SpikesResendSubject(p.device), Header: nats.Header{}}
		m.Header.Set(GroupHeader, r.group)
		m.Header.Set(PosHeader, r.after.String())
		p.mu.Lock()
		stampTime(m, &p.stamp)
		if p.up != nil {
			p.up.Sign(m)
		}
		p.mu.Unlock()
		p.spikesResend.requests.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), ResendTimeout)
		a, err := p.nc.RequestMsgWithContext(ctx, m)
		cancel()
		switch {
		case err == nil && a.Header.Get(ResendRefusedHeader) != "":
			p.spikesResend.refused.Add(1)
			return Pos{}, false, false
		case err == nil:
			p.spikesResend.answered.Add(1)
			n, _ := strconv.ParseUint(a.Header.Get(ResentHeader), 10, 64)
			p.spikesResend.announced.Add(n)
			if a.Header.Get(ResendGapHeader) == "1" {
				p.spikesResend.gaps.Add(1)
			}
			to, err := ParsePos(a.Header.Get(ResentToHeader))
			return to, n > 0 && err == nil, true
		case errors.Is(err, nats.ErrConnectionClosed):
			return Pos{}, false, false
		}
		select {
		case <-closed:
			return Pos{}, false, false
		case <-time.After(ResendTimeout / 2):
		}
	}
	p.spikesResend.unanswered.Add(1)
	return Pos{}, false, false
}
