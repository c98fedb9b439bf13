// Package standby lets several predictord instances serve the same device
// and cells with exactly one of them publishing: every instance computes
// the decisions (the core is deterministic given the frames and the initial
// histories), and the holder of a lease in a JetStream key-value bucket
// publishes them (Lease); the others hold theirs back in a Gate until the
// holder's messages are seen, and publish from the first message the holder
// did not publish when they take the lease over.
//
// The lease is an entry of a key-value bucket: the holder renews it with a
// revision-checked update (compare-and-set) every Renew; a standby takes it
// with a create once the entry is gone (released, or aged out of the
// bucket), or with an update checked against a revision it has seen
// unchanged for TTL by its own clock (the holder stopped renewing: killed,
// stalled, cut off). A holder counts as holder only until TTL - Margin after
// the start of its last successful renewal, by its own clock, and a standby
// first sees a revision after that renewal started, so an old holder and a
// new one never publish at once as long as a message reaches the other
// instances within Margin. A holder frozen (SIGSTOP, a paused VM) after
// its client took a message and before it wrote it breaks that: the message
// goes out when the holder resumes, after the new holder sent its own copy;
// a receiver that must act on each message once drops a repeated position
// (stream.PosHeader).
// A lost holder is thus replaced within about TTL +
// Retry, whatever the bucket's own expiry (kept at least LeaseBucketMinTTL,
// so that a server need not expire entries at the lease's pace).
package standby

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// DefaultTTL is predictord's lease TTL: renewals every 15 ms, a lost
// holder replaced within about 66 ms, inside a decision's 80-ms period.
const DefaultTTL = 60 * time.Millisecond

// LeaseConfig configures a Lease.
type LeaseConfig struct {
	// KV is the lease bucket (LeaseBucket with TTL).
	KV jetstream.KeyValue
	// Key names the lease in the bucket (e.g. the replica group's name).
	Key string
	// Holder identifies this instance; every instance of a group needs its
	// own.
	Holder string
	// TTL is the lease's: an entry not renewed for TTL may be taken over.
	TTL time.Duration
	// Renew is the holder's renewal period (default TTL/4).
	Renew time.Duration
	// Retry is how often a standby looks at the lease and tries to take it
	// (default TTL/10): a lost holder is replaced within about TTL + Retry.
	Retry time.Duration
	// Margin is how long before its entry could age out the holder stops
	// counting as holder (default TTL/4); it must exceed the delivery time
	// of a message between instances.
	Margin time.Duration
	// Eligible, if not nil, must report true for this instance to try to
	// take the lease (a standby that has not caught up with the holder's
	// state must not take over); a held lease is renewed regardless.
	Eligible func() bool
	// Healthy, if not nil, must report true for the holder to renew: a
	// holder whose work stalled (a hung model call) lets its holding run
	// out, so that a standby takes over.
	Healthy func() bool
	// Recreate, if not nil, opens the lease bucket anew (LeaseBucket). Run
	// calls it when the bucket has not answered for TTL (deleted, or lost
	// with a JetStream server's storage), at most once per TTL, so that a
	// lost bucket does not leave the group without a holder for good.
	Recreate func(ctx context.Context) (jetstream.KeyValue, error)
	// OnGain is called (from Run's goroutine) when this instance becomes
	// the holder; OnLoss when it stops being the holder. Either may be nil.
	OnGain, OnLoss func()
	// OnRenew, if not nil, is called (from Renew's goroutine) after each
	// successful renewal.
	OnRenew func()
	// Auth, if not nil, signs this instance's entry and verifies the
	// others'.
	Auth Authenticator
	// OnForeign, if not nil, hears of an entry no instance wrote (not a
	// lease entry, or its signature fails): it is refused as a holder and
	// taken over at once.
	OnForeign func(err error)
}

// LeaseEntry is the content of a lease entry: the holder's id and the
// incarnation of its process (a random id each Lease draws), so that two
// processes started with the same id never count each other's entry as
// their own.
type LeaseEntry struct {
	Holder      string    `json:"holder"`
	Incarnation string    `json:"incarnation,omitempty"`
	Since       time.Time `json:"since"`
	// Sig is the signature over the entry without it (LeaseConfig.Auth).
	Sig []byte `json:"sig,omitempty"`
}

// signed returns the bytes an entry's signature covers.
func (e LeaseEntry) signed() ([]byte, error) {
	e.Sig = nil
	return json.Marshal(e)
}

// checkEntry decodes a lease entry's value and checks that an instance
// wrote it: a holder and an incarnation, and with auth a valid signature.
func checkEntry(value []byte, auth Authenticator) (LeaseEntry, error) {
	v, err := ReadEntry(value)
	if err != nil {
		return v, err
	}
	if v.Holder == "" || v.Incarnation == "" {
		return v, errors.New("standby: lease entry without a holder or an incarnation")
	}
	if auth != nil {
		b, err := v.signed()
		if err == nil {
			err = auth.Verify(b, v.Sig)
		}
		if err != nil {
			return v, fmt.Errorf("standby: lease entry of %s: signature: %w", v.Holder, err)
		}
	}
	return v, nil
}

// ReadEntry decodes a lease entry's value.
func ReadEntry(value []byte) (LeaseEntry, error) {
	var v LeaseEntry
	if err := json.Unmarshal(value, &v); err != nil {
		return LeaseEntry{}, fmt.Errorf("standby: lease entry: %w", err)
	}
	return v, nil
}

// HolderOf returns the holder id stored in a lease entry's value.
func HolderOf(value []byte) (string, error) {
	v, err := ReadEntry(value)
	return v.Holder, err
}

// Lease is one instance's view of a lease. Its methods are safe for
// concurrent use; Run drives it, or a caller calls TryAcquire, Renew and
// Release itself.
type Lease struct {
	cfg   LeaseConfig
	value []byte
	inc   string

	mu        sync.Mutex
	kv        jetstream.KeyValue
	held      bool
	rev       uint64
	until     time.Time // end of the holding by this instance's clock
	holder    string    // the holder last seen, "" none
	holderInc string    // its incarnation
	foreign   uint64    // entries refused as written by no instance
	// The other holder's revision last seen and when this instance first
	// saw it (a revision unchanged for TTL is taken over).
	seenRev uint64
	seenAt  time.Time
	gains   uint64
	losses  uint64
}

// NewLease returns a lease of cfg, not held.
func NewLease(cfg LeaseConfig) (*Lease, error) {
	switch {
	case cfg.KV == nil:
		return nil, errors.New("standby: lease without a bucket")
	case cfg.Key == "" || cfg.Holder == "":
		return nil, errors.New("standby: lease without a key or a holder id")
	case cfg.TTL <= 0:
		return nil, fmt.Errorf("standby: lease TTL %v not positive", cfg.TTL)
	}
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.TTL / 4
	}
	if cfg.Retry <= 0 {
		cfg.Retry = cfg.TTL / 10
	}
	if cfg.Margin <= 0 {
		cfg.Margin = cfg.TTL / 4
	}
	if cfg.Renew+cfg.Margin >= cfg.TTL {
		return nil, fmt.Errorf("standby: lease renewal %v plus margin %v not below TTL %v", cfg.Renew, cfg.Margin, cfg.TTL)
	}
	inc := nuid.Next()
	e := LeaseEntry{Holder: cfg.Holder, Incarnation: inc, Since: time.Now().UTC()}
	if cfg.Auth != nil {
		b, err := e.signed()
		if err == nil {
			e.Sig, err = cfg.Auth.Sign(b)
		}
		if err != nil {
			return nil, fmt.Errorf("standby: sign the lease value: %w", err)
		}
	}
	v, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("standby: lease value: %w", err)
	}
	return &Lease{cfg: cfg, value: v, inc: inc, kv: cfg.KV}, nil
}

// KV returns the lease bucket in use (LeaseConfig.KV, or the one Recreate
// opened last).
func (l *Lease) KV() jetstream.KeyValue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kv
}

// Incarnation returns the random id of this Lease, stored in its entry
// beside the holder id.
func (l *Lease) Incarnation() string { return l.inc }

// Revision returns the entry's revision this instance last wrote or saw:
// a holder's grows with each renewal, and a successor's is higher still.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Config returns the configuration with its defaults filled in.
func (l *Lease) Config() LeaseConfig { return l.cfg }

// Held reports whether this instance holds the lease now: it acquired or
// renewed it, and its holding has not run out by its own clock (a stalled
// holder that resumes finds it has run out before it learns of a
// successor).
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held && time.Now().Before(l.until)
}

// LeaseStatus is a snapshot of a lease's state for status and metrics.
type LeaseStatus struct {
	// Held: this instance holds the lease (Held).
	Held bool
	// Holder is the holder last seen in the bucket ("" none).
	Holder string
	// Revision is the entry's revision this instance last wrote or saw.
	Revision uint64
	// HolderIncarnation is that holder's incarnation ("" none).
	HolderIncarnation string
	// Gains and Losses count this instance's takeovers and losses.
	Gains, Losses uint64
	// Foreign counts entries refused as written by no instance.
	Foreign uint64
}

// Status returns the lease's state.
func (l *Lease) Status() LeaseStatus {
	held := l.Held()
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaseStatus{Held: held, Holder: l.holder, HolderIncarnation: l.holderInc, Revision: l.rev, Gains: l.gains, Losses: l.losses,
		Foreign: l.foreign}
}

// TryAcquire takes the lease if no entry holds it (or the entry is this
// Lease's own, same holder id and incarnation, e.g. after a NATS server
// restart) and reports whether this instance now holds it. A lease
// already held is renewed instead. Another entry is taken over once its
// revision has stayed unchanged for TTL, counted from the first answer
// that showed it (the holder may have written it just before answering).
func (l *Lease) TryAcquire(ctx context.Context) (bool, error) {
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	if held {
		err := l.Renew(ctx)
		return err == nil, err
	}
	start := time.Now()
	rev, err := l.KV().Create(ctx, l.cfg.Key, l.value)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := l.KV().Get(ctx, l.cfg.Key)
		if gerr != nil {
			if errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted) {
				return false, nil // gone meanwhile: the next try may take it
			}
			return false, fmt.Errorf("standby: lease %s: read holder: %w", l.cfg.Key, gerr)
		}
		answered := time.Now()
		v, herr := checkEntry(e.Value(), l.cfg.Auth)
		own := herr == nil && v.Holder == l.cfg.Holder && v.Incarnation == l.inc
		l.mu.Lock()
		l.holder, l.holderInc = v.Holder, v.Incarnation
		stale := false
		if herr != nil {
			// Written by no instance: refused as a holder, taken over now.
			l.holder, l.holderInc, stale = "", "", true
			l.foreign++
		} else if !own {
			if e.Revision() != l.seenRev {
				l.seenRev, l.seenAt = e.Revision(), answered
			}
			stale = answered.Sub(l.seenAt) > l.cfg.TTL
		}
		l.mu.Unlock()
		if herr != nil && l.cfg.OnForeign != nil {
			l.cfg.OnForeign(fmt.Errorf("standby: lease %s: refused, taking it over: %w", l.cfg.Key, herr))
		}
		if !own && !stale {
			return false, nil
		}
		// The entry is this instance's own (it lost track of it, e.g. its
		// renewal failed while the server restarted), or another holder's
		// that has not been renewed for TTL: its holding has run out by its
		// own clock. The update is checked against the revision seen, so a
		// renewal that lands first wins.
		rev, err = l.KV().Update(ctx, l.cfg.Key, l.value, e.Revision())
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return false, nil
		}
		return false, fmt.Errorf("standby: acquire lease %s: %w", l.cfg.Key, err)
	}
	l.mu.Lock()
	l.held, l.rev, l.until, l.holder, l.holderInc = true, rev, start.Add(l.cfg.TTL-l.cfg.Margin), l.cfg.Holder, l.inc
	l.gains++
	l.mu.Unlock()
	if l.cfg.OnGain != nil {
		l.cfg.OnGain()
	}
	return true, nil
}

// ErrLost is returned by Renew when another instance holds the lease or the
// entry is gone: this instance is no longer the holder.
var ErrLost = errors.New("standby: lease lost")

// Renew extends the holding by a revision-checked update of the entry. It
// returns ErrLost (and calls OnLoss) when the entry changed or vanished; on
// other errors (the server unreachable) the lease stays held until its time
// runs out, and Renew may be retried.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	held, rev := l.held, l.rev
	l.mu.Unlock()
	if !held {
		return fmt.Errorf("%w: renewing %s", ErrLost, l.cfg.Key)
	}
	start := time.Now()
	nrev, err := l.KV().Update(ctx, l.cfg.Key, l.value, rev)
	switch {
	case err == nil:
		l.mu.Lock()
		lapsed := false
		if l.held && l.rev == rev {
			lapsed = !start.Before(l.until)
			l.rev, l.until = nrev, start.Add(l.cfg.TTL-l.cfg.Margin)
		}
		l.mu.Unlock()
		if lapsed && l.cfg.OnGain != nil {
			// The holding had run out (messages were kept meanwhile) and
			// nobody took the lease: holding again, as at a takeover.
			l.cfg.OnGain()
		}
		if l.cfg.OnRenew != nil {
			l.cfg.OnRenew()
		}
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound),
		errors.Is(err, jetstream.ErrKeyExists):
		l.lose()
		return fmt.Errorf("%w: renewing %s: %w", ErrLost, l.cfg.Key, err)
	default:
		if !l.Held() {
			l.lose()
		}
		return fmt.Errorf("standby: renew lease %s: %w", l.cfg.Key, err)
	}
}

// Holder reads the lease entry and returns it with its revision, as seen
// now; the holder last seen (LeaseStatus) becomes its. An entry no
// instance wrote is an error (checkEntry).
func (l *Lease) Holder(ctx context.Context) (LeaseEntry, uint64, error) {
	e, err := l.KV().Get(ctx, l.cfg.Key)
	if err != nil {
		return LeaseEntry{}, 0, fmt.Errorf("standby: lease %s: read holder: %w", l.cfg.Key, err)
	}
	v, err := checkEntry(e.Value(), l.cfg.Auth)
	if err != nil {
		return LeaseEntry{}, 0, err
	}
	l.mu.Lock()
	if !l.held {
		l.holder, l.holderInc = v.Holder, v.Incarnation
	}
	l.mu.Unlock()
	return v, e.Revision(), nil
}

// lose marks the lease not held and calls OnLoss once.
func (l *Lease) lose() {
	l.mu.Lock()
	was := l.held
	l.held = false
	if was {
		l.losses++
	}
	l.mu.Unlock()
	if was && l.cfg.OnLoss != nil {
		l.cfg.OnLoss()
	}
}

// Release gives the lease up at once (a delete checked against this
// instance's revision), so a standby takes over without waiting for the
// TTL. Releasing a lease not held does nothing.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	held, rev := l.held, l.rev
	l.mu.Unlock()
	if !held {
		return nil
	}
	l.lose()
	if err := l.KV().Delete(ctx, l.cfg.Key, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("standby: release lease %s: %w", l.cfg.Key, err)
	}
	return nil
}

// Run keeps the lease until ctx ends: a standby tries to take it every
// Retry, the holder renews it every Renew (retrying every Retry after a
// failure); a bucket that has not answered for TTL is recreated
// (LeaseConfig.Recreate). On return it releases the lease if it holds it.
// Errors other than losing the lease go to onErr (may be nil) and do not
// stop Run.
func (l *Lease) Run(ctx context.Context, onErr func(error)) {
	report := func(err error) {
		if err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	answered, recreated := time.Now(), time.Time{}
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Retry+time.Second)
			report(l.Release(rctx))
			cancel()
			return
		case <-t.C:
		}
		l.mu.Lock()
		held := l.held
		l.mu.Unlock()
		next := l.cfg.Retry
		var err error
		if held && l.cfg.Healthy != nil && !l.cfg.Healthy() {
			report(fmt.Errorf("standby: lease %s: not renewed: this instance's work stalled", l.cfg.Key))
			t.Reset(l.cfg.Retry)
			continue
		}
		if held {
			if err = l.Renew(ctx); err == nil {
				next = l.cfg.Renew
			} else if errors.Is(err, ErrLost) {
				err = nil // the bucket answered
			} else {
				report(err)
			}
		} else if l.cfg.Eligible == nil || l.cfg.Eligible() {
			var ok bool
			ok, err = l.TryAcquire(ctx)
			report(err)
			if ok {
				next = l.cfg.Renew
			}
		}
		now := time.Now()
		if err == nil {
			answered = now
		} else if l.cfg.Recreate != nil && now.Sub(answered) > l.cfg.TTL && now.Sub(recreated) > l.cfg.TTL {
			recreated = now
			l.recreate(ctx, report)
		}
		t.Reset(next)
	}
}

// recreate opens the lease bucket anew after it stopped answering.
func (l *Lease) recreate(ctx context.Context, report func(error)) {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.TTL)
	defer cancel()
	kv, err := l.cfg.Recreate(rctx)
	if err != nil {
		report(fmt.Errorf("standby: lease %s: the bucket did not answer for %v, recreating it: %w", l.cfg.Key, l.cfg.TTL, err))
		return
	}
	l.mu.Lock()
	l.kv = kv
	l.mu.Unlock()
	report(fmt.Errorf("standby: lease %s: the bucket did not answer for %v: opened it anew", l.cfg.Key, l.cfg.TTL))
}
