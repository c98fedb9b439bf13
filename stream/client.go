package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
)

// Publisher is the device side of the protocol: it publishes stimulus frames
// and control messages for one device and receives the daemon's decisions.
// It is safe for concurrent use.
type Publisher struct {
	nc     *nats.Conn
	device string

	mu    sync.Mutex
	buf   []byte
	msg   nats.Msg // reused for authenticated messages
	stamp int64    // the last TimeHeader sent

	// up signs what the publisher sends, down checks what it receives
	// (UseKeys); nil: off.
	up, down *Auth
	// lastSent is the last frame sent (its seq), -1 before the first.
	lastSent atomic.Int64
	dropped  struct{ ahead, authMissing, authInvalid atomic.Uint64 }
	// daemonDropped counts the messages the daemon's drop notices
	// reported, by Drop.Kind.
	daemonDropped [DropControl + 1]atomic.Uint64
	onDrop        atomic.Pointer[func(Drop)]

	fenceMu sync.Mutex
	fences  []*Fence // one per decisions or events subscription

	// resend keeps the frames sent and answers resend requests
	// (ServeResend); nil: off. Guarded by mu.
	resend *resendServer

	spikesResend resendCounters // the decision subscriptions' resend requests
}

// DropStats counts the messages and decisions a Publisher's subscriptions
// dropped besides its fences'. Every field only grows.
type DropStats struct {
	// Ahead counts decisions whose window ends after the last frame the
	// publisher sent: no daemon could have taken them.
	Ahead uint64
	// AuthMissing and AuthInvalid count messages without a valid
	// authenticator (UseKeys).
	AuthMissing, AuthInvalid uint64
}

// DaemonDropped returns the frames and control messages the daemon
// reported dropping (drop notices received by SubscribeEvents).
func (p *Publisher) DaemonDropped() (frames, control uint64) {
	return p.daemonDropped[DropFrames].Load(), p.daemonDropped[DropControl].Load()
}

// OnDrop sets a function SubscribeEvents calls with every drop notice
// (from the NATS client's delivery goroutine): a control message dropped
// is lost, resend it.
func (p *Publisher) OnDrop(fn func(Drop)) { p.onDrop.Store(&fn) }

// Dropped returns the counters.
func (p *Publisher) Dropped() DropStats {
	return DropStats{Ahead: p.dropped.ahead.Load(), AuthMissing: p.dropped.authMissing.Load(), AuthInvalid: p.dropped.authInvalid.Load()}
}

// UseKeys turns on message authentication (docs/protocol.md,
// "Authentication"): frames and control messages are signed with k.Up,
// decisions and events without a valid authenticator under k.Down are
// dropped (DropStats). Call it before publishing or subscribing.
func (p *Publisher) UseKeys(k msgauth.DeviceKeys) error {
	up, err := NewAuth(k.Up)
	if err != nil {
		return fmt.Errorf("stream: keys of %s: up: %w", p.device, err)
	}
	down, err := NewAuth(k.Down)
	if err != nil {
		return fmt.Errorf("stream: keys of %s: down: %w", p.device, err)
	}
	p.mu.Lock()
	p.up, p.down = up, down
	p.mu.Unlock()
	return nil
}

// send publishes b on subject, signed when UseKeys was called. The
// caller holds p.mu.
func (p *Publisher) send(subject string, b []byte) error {
	if p.up == nil {
		return p.nc.Publish(subject, b)
	}
	m := &p.msg
	m.Subject, m.Data = subject, b
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	stampTime(m, &p.stamp)
	p.up.Sign(m)
	return p.nc.PublishMsg(m)
}

// authentic reports whether a received message passes the down key (always,
// without keys), counting those that do not.
func (p *Publisher) authentic(m *nats.Msg) bool {
	if p.down == nil {
		return true
	}
	switch err := p.down.Check(m); {
	case err == nil:
		return true
	case errors.Is(err, ErrAuthMissing):
		p.dropped.authMissing.Add(1)
	default:
		p.dropped.authInvalid.Add(1)
	}
	return false
}

// NewPublisher returns a publisher for device over an open connection.
func NewPublisher(nc *nats.Conn, device string) (*Publisher, error) {
	if nc == nil {
		return nil, fmt.Errorf("stream: new publisher: nil connection")
	}
	if err := CheckDevice(device); err != nil {
		return nil, fmt.Errorf("stream: new publisher: %w", err)
	}
	p := &Publisher{nc: nc, device: device, buf: make([]byte, 0, FramesHeaderLen+MaxFramesPerMsg*FrameLen)}
	p.lastSent.Store(-1)
	return p, nil
}

// Device returns the publisher's device name.
func (p *Publisher) Device() string { return p.device }

// Conn returns the publisher's NATS connection.
func (p *Publisher) Conn() *nats.Conn { return p.nc }

// PublishFrames publishes one frames message (1 to MaxFramesPerMsg
// consecutive frames). It allocates nothing after warm-up beyond what the
// NATS client does.
func (p *Publisher) PublishFrames(f *Frames) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := AppendFrames(p.buf[:0], f)
	if err != nil {
		return fmt.Errorf("stream: publish frames on %s: %w", p.device, err)
	}
	p.buf = b
	p.keepFrames(f)
	// Before the publication: a decision on these frames may arrive before
	// Publish returns.
	p.lastSent.Store(f.LastSeq())
	if err := p.send(StimSubject(p.device), b); err != nil {
		return fmt.Errorf("stream: publish frames on %s: %w", p.device, err)
	}
	return nil
}

// PublishRaw publishes an arbitrary payload on one of the device's subjects
// (kind "stim", "ctl", ...). Tests use it to send hostile payloads.
func (p *Publisher) PublishRaw(kind string, payload []byte) error {
	if err := p.nc.Publish("rgc."+p.device+"."+kind, payload); err != nil {
		return fmt.Errorf("stream: publish raw on %s.%s: %w", p.device, kind, err)
	}
	return nil
}

// SendHistory sends initial spike histories, split into messages of at most
// MaxCellsPerMsg cells. A history must reach the daemon before the cell's
// first window is due (before frame first+rgc.WindowBins-1 of the stream or
// of the stream after a reset).
func (p *Publisher) SendHistory(h []History) error {
	for len(h) > 0 {
		n := min(len(h), MaxCellsPerMsg)
		if err := p.sendControl(&Control{Op: OpHistory, Histories: h[:n]}); err != nil {
			return err
		}
		h = h[n:]
	}
	return nil
}

// Reset asks the daemon to forget the device's stimulus and every cell's
// state (including histories sent before); the next frame starts a new
// stream at any sequence number.
func (p *Publisher) Reset() error { return p.sendControl(&Control{Op: OpReset}) }

func (p *Publisher) sendControl(c *Control) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := AppendControl(nil, c)
	if err != nil {
		return fmt.Errorf("stream: control for %s: %w", p.device, err)
	}
	if err := p.send(ControlSubject(p.device), b); err != nil {
		return fmt.Errorf("stream: control for %s: %w", p.device, err)
	}
	return nil
}

// DefaultTimeout bounds Flush and Status when ctx has no deadline.
const DefaultTimeout = 10 * time.Second

func withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// Flush waits until the server has processed everything published so far
// (at most DefaultTimeout when ctx has no deadline).
func (p *Publisher) Flush(ctx context.Context) error {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if err := p.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("stream: flush %s: %w", p.device, err)
	}
	return nil
}

// Status asks a daemon serving the device for its status. With no daemon
// serving the device it returns an error wrapping nats.ErrNoResponders; with
// several (shards) it returns the first answer. Without a deadline on ctx
// it waits at most DefaultTimeout.
func (p *Publisher) Status(ctx context.Context) (*Status, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	m, err := p.nc.RequestWithContext(ctx, StatusSubject(p.device), nil)
	if err != nil {
		return nil, fmt.Errorf("stream: status of %s: %w", p.device, err)
	}
	var s Status
	if err := DecodeStatus(m.Data, &s); err != nil {
		return nil, fmt.Errorf("stream: status of %s: %w", p.device, err)
	}
	return &s, nil
}

// SubscribeDecisions calls fn for every decisions message on the device's
// spikes subject, from the NATS client's delivery goroutine. fn gets a
// reused value (copy what it keeps) and a non-nil error for a payload that
// does not decode. With UseKeys, a message without a valid authenticator
// is dropped. The messages of a hot-standby group pass a Fence: a message
// already received from another replica, or from an older holder, is
// dropped (FenceStats counts them). Once the publisher sent a frame, a
// decision whose window ends after the last frame it sent is dropped
// (DropStats.Ahead): no daemon took it. After each reconnect the
// subscription asks the groups it heard from for the messages it missed
// (docs/protocol.md, "Decisions resend"; SpikesResent counts the
// requests), its fence takes each copy once, and it holds what it takes
// until the copies are in (at most ResendHold), to call fn in position
// order; fn is then called from the goroutine that releases them, never
// two calls at once. A group's decision of a window not after one fn
// already got for its cell is dropped (FenceStats.Late): fn gets each
// cell's windows in order.
func (p *Publisher) SubscribeDecisions(fn func(d *Decisions, err error)) (*nats.Subscription, error) {
	var d Decisions
	f := p.newFence()
	h := &resendHold{fence: f, deliver: func(d *Decisions) {
		if !p.dropAhead(d) {
			fn(d, nil)
		}
	}}
	gen := p.reconnects()
	sub, err := p.nc.Subscribe(SpikesSubject(p.device), func(m *nats.Msg) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if g := p.reconnects(); g != gen {
			gen = g
			h.begin(f.lost(g, time.Now())) // before the first message of the new connection
		}
		if !p.authentic(m) {
			return
		}
		if err := DecodeDecisions(m.Data, &d); err != nil {
			fn(nil, err)
			return
		}
		h.receive(m.Header, &d, time.Now())
	})
	if err != nil {
		return nil, fmt.Errorf("stream: subscribe decisions of %s: %w", p.device, err)
	}
	p.watchReconnects(sub, f, h)
	return sub, nil
}

// dropAhead removes from d the decisions whose window ends after the last
// frame sent, counting them, and reports whether none is left.
func (p *Publisher) dropAhead(d *Decisions) bool {
	last := p.lastSent.Load()
	if last < 0 {
		return false
	}
	kept := d.Decisions[:0]
	for _, x := range d.Decisions {
		if x.End > last {
			p.dropped.ahead.Add(1)
			continue
		}
		kept = append(kept, x)
	}
	d.Decisions = kept
	return len(kept) == 0
}

// SubscribeEvents calls fn for every stream event the daemon publishes for
// the device (a new epoch: resend the cells' histories), from the NATS
// client's delivery goroutine, with a non-nil error for a payload that does
// not decode. With UseKeys, a message without a valid authenticator is
// dropped. Drop notices on the subject are counted (DaemonDropped) and go
// to OnDrop's function, not to fn.
func (p *Publisher) SubscribeEvents(fn func(e Event, err error)) (*nats.Subscription, error) {
	sub, err := p.nc.Subscribe(EventsSubject(p.device), func(m *nats.Msg) {
		if !p.authentic(m) {
			return
		}
		if PayloadType(m.Data) == TypeDrop {
			var d Drop
			if err := DecodeDrop(m.Data, &d); err != nil {
				fn(Event{}, err)
				return
			}
			p.daemonDropped[d.Kind].Add(d.Count)
			if f := p.onDrop.Load(); f != nil {
				(*f)(d)
			}
			return
		}
		var e Event
		err := DecodeEvent(m.Data, &e)
		fn(e, err)
	})
	if err != nil {
		return nil, fmt.Errorf("stream: subscribe events of %s: %w", p.device, err)
	}
	return sub, nil
}

// newFence returns a Fence counted in FenceStats.
func (p *Publisher) newFence() *Fence {
	f := &Fence{}
	p.fenceMu.Lock()
	p.fences = append(p.fences, f)
	p.fenceMu.Unlock()
	return f
}

// FenceStats sums what the fences of the publisher's subscriptions
// dropped.
func (p *Publisher) FenceStats() FenceStats {
	p.fenceMu.Lock()
	defer p.fenceMu.Unlock()
	var t FenceStats
	for _, f := range p.fences {
		s := f.Stats()
		t.Repeated += s.Repeated
		t.Fenced += s.Fenced
		t.Resynced += s.Resynced
		t.Unfenced += s.Unfenced
		t.Resent += s.Resent
		t.Late += s.Late
	}
	return t
}

// Collector gathers every decision a daemon publishes for a device; tests,
// the replay tool and the bench use it.
type Collector struct {
	sub *nats.Subscription

	mu     sync.Mutex
	got    []Decision
	errs   int
	notify chan struct{}
}

// Collect subscribes to the publisher's decisions. Call Flush on the
// publisher's connection before publishing frames to be sure the
// subscription is in place.
func (p *Publisher) Collect() (*Collector, error) {
	c := &Collector{notify: make(chan struct{}, 1)}
	sub, err := p.SubscribeDecisions(func(d *Decisions, err error) {
		c.mu.Lock()
		if err != nil {
			c.errs++
		} else {
			c.got = append(c.got, d.Decisions...)
		}
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	c.sub = sub
	return c, nil
}

// Decisions returns a copy of the decisions received so far, in arrival
// order.
func (c *Collector) Decisions() []Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Decision(nil), c.got...)
}

// Errors returns the number of payloads that did not decode.
func (c *Collector) Errors() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errs
}

// WaitFor waits until done(decisions so far) is true or ctx ends.
func (c *Collector) WaitFor(ctx context.Context, done func([]Decision) bool) error {
	for {
		c.mu.Lock()
		ok := done(c.got)
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream: waiting for decisions: %w", ctx.Err())
		case <-c.notify:
		}
	}
}

// Close unsubscribes.
func (c *Collector) Close() error {
	if err := c.sub.Unsubscribe(); err != nil {
		return fmt.Errorf("stream: close collector: %w", err)
	}
	return nil
}
