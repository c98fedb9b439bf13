package standby

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
)

// testTTL is the lease TTL of the tests: long enough that a busy machine
// renews in time, short enough for quick takeovers.
const testTTL = 2 * time.Second

// waitLimit bounds every wait of the tests (a failure, not a measurement).
const waitLimit = 60 * time.Second

// bucket connects to s and opens the lease bucket with TTL ttl.
func bucket(t *testing.T, s *server.Server, ttl time.Duration) (*nats.Conn, jetstream.KeyValue) {
	t.Helper()
	nc, js := embedtest.Connect(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	kv, err := LeaseBucket(ctx, js, "leases", ttl)
	if err != nil {
		t.Fatal(err)
	}
	return nc, kv
}

func lease(t *testing.T, kv jetstream.KeyValue, holder string, cfg LeaseConfig) *Lease {
	t.Helper()
	cfg.KV, cfg.Holder = kv, holder
	if cfg.Key == "" {
		cfg.Key = "group"
	}
	if cfg.TTL == 0 {
		cfg.TTL = testTTL
	}
	l, err := NewLease(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func TestNewLeaseValidates(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	_, kv := bucket(t, s, testTTL)
	cases := []struct {
		name string
		cfg  LeaseConfig
	}{
		{"no bucket", LeaseConfig{Key: "k", Holder: "a", TTL: time.Second}},
		{"no key", LeaseConfig{KV: kv, Holder: "a", TTL: time.Second}},
		{"no holder", LeaseConfig{KV: kv, Key: "k", TTL: time.Second}},
		{"no ttl", LeaseConfig{KV: kv, Key: "k", Holder: "a"}},
		{"renew+margin >= ttl", LeaseConfig{KV: kv, Key: "k", Holder: "a", TTL: time.Second, Renew: 600 * time.Millisecond, Margin: 400 * time.Millisecond}},
	}
	for _, c := range cases {
		if _, err := NewLease(c.cfg); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// TestLeaseExclusive: one holder at a time; the others see who holds it;
// renewals move the revision on; the holder reclaims its own entry after
// losing track of it.
func TestLeaseExclusive(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	_, kv := bucket(t, s, testTTL)
	ctx := ctxT(t)
	a, b := lease(t, kv, "a", LeaseConfig{}), lease(t, kv, "b", LeaseConfig{})
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a: acquire = %v, %v", ok, err)
	}
	if ok, err := b.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("b: acquire while a holds = %v, %v", ok, err)
	}
	if st := b.Status(); st.Held || st.Holder != "a" {
		t.Fatalf("b's status %+v, want not held, holder a", st)
	}
	r0 := a.Status().Revision
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if r1 := a.Status().Revision; r1 <= r0 {
		t.Fatalf("revision %d after renewal, want > %d", r1, r0)
	}
	// b cannot renew what it does not hold.
	if err := b.Renew(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("b renews: %v, want ErrLost", err)
	}
	// a reclaims its own entry after losing track of it (a renewal whose
	// answer was lost).
	a.lose()
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a's own entry: acquire = %v, %v", ok, err)
	}
	// A second process with a's id (a restart while a lives, or a twin
	// started with the same --standby-id) is another holder: it does not
	// take the entry while a renews, and takes it only after a stopped
	// renewing for the TTL.
	a2 := lease(t, kv, "a", LeaseConfig{})
	for range 3 {
		if ok, err := a2.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("a's twin: acquire while a renews = %v, %v", ok, err)
		}
		if err := a.Renew(ctx); err != nil {
			t.Fatalf("a renews while its twin waits: %v", err)
		}
	}
	last := time.Now()
	awaitTakeover(t, ctx, a2)
	if d := time.Since(last); d < testTTL {
		t.Fatalf("a's twin took over %v after a's last renewal, want at least the TTL %v", d, testTTL)
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("a renews after its twin took over: %v, want ErrLost", err)
	}
	if a.Held() {
		t.Fatal("a still holds after losing")
	}
}

// TestLeaseTakeover: when the holder releases, stops renewing (stalled) or
// dies (connection gone), a standby trying every Retry takes over; never
// before the holder's own clock says it stopped holding, and, for a holder
// that did not release, not before the TTL since its last renewal. The
// takeover time is logged.
func TestLeaseTakeover(t *testing.T) {
	cases := []struct {
		name string
		stop func(ctx context.Context, a *Lease, anc *nats.Conn) error
		// waitsTTL: the holder's TTL must pass before the takeover.
		waitsTTL bool
	}{
		{"release", func(ctx context.Context, a *Lease, _ *nats.Conn) error { return a.Release(ctx) }, false},
		{"stalled", func(context.Context, *Lease, *nats.Conn) error { return nil }, true},
		{"killed", func(_ context.Context, _ *Lease, anc *nats.Conn) error { anc.Close(); return nil }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := embedtest.JetStreamServer(t, embednats.Options{})
			anc, akv := bucket(t, s, testTTL)
			_, bkv := bucket(t, s, testTTL)
			ctx := ctxT(t)
			var aLost atomic.Int32
			a := lease(t, akv, "a", LeaseConfig{OnLoss: func() { aLost.Add(1) }})
			var aHeldAtGain atomic.Bool
			b := lease(t, bkv, "b", LeaseConfig{OnGain: func() { aHeldAtGain.Store(a.Held()) }})
			if ok, err := a.TryAcquire(ctx); !ok || err != nil {
				t.Fatalf("a: acquire = %v, %v", ok, err)
			}
			renewed := time.Now()
			if err := a.Renew(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.stop(ctx, a, anc); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			began := awaitTakeover(t, ctx, b)
			took := time.Since(stopped)
			t.Logf("%s: takeover %v after the stop (TTL %v, retry %v)", c.name, took, testTTL, b.Config().Retry)
			if aHeldAtGain.Load() {
				t.Fatal("b gained while a still counted itself the holder")
			}
			if c.waitsTTL && time.Since(renewed) < testTTL {
				t.Fatalf("b took over %v after a's last renewal, before the TTL %v", time.Since(renewed), testTTL)
			}
			// Held lapses TTL - Margin after the taking call began; a runner
			// stalled that long between the call and this check sees it lapsed.
			st := b.Status()
			fresh := time.Since(began) < testTTL-b.Config().Margin
			if (fresh && !st.Held) || st.Holder != "b" || st.Gains != 1 {
				t.Fatalf("b's status %+v (%v after the taking call began)", st, time.Since(began))
			}
			if c.name == "stalled" {
				// The stalled holder resumes: its renewal finds b's entry.
				if err := a.Renew(ctx); !errors.Is(err, ErrLost) {
					t.Fatalf("stalled a renews: %v, want ErrLost", err)
				}
				if aLost.Load() != 1 {
					t.Fatalf("a's OnLoss called %d times, want 1", aLost.Load())
				}
			}
		})
	}
}

// TestLeaseTakeoverBeforeExpiry: with a lease TTL shorter than the
// bucket's expiry, a standby takes over a stalled holder's lease once it
// has seen the entry's revision unchanged for the TTL, long before the
// entry could age out, and never while the holder still counts itself the
// holder; a holder that keeps renewing is never taken over.
//
// The test goroutine renews for the holder. A loaded runner may stall it
// for more than the TTL between two renewals; a takeover (or a lost entry)
// after such a late renewal is the lease working, not a fault: the attempt
// is repeated with a fresh key, up to maxLate times. A takeover within the
// TTL of the holder's last renewal always fails the test.
func TestLeaseTakeoverBeforeExpiry(t *testing.T) {
	const (
		ttl     = 300 * time.Millisecond
		maxLate = 5
	)
	s := embedtest.JetStreamServer(t, embednats.Options{})
	_, akv := bucket(t, s, ttl)
	_, bkv := bucket(t, s, ttl)
	ctx := ctxT(t)
	for attempt := 0; ; attempt++ {
		if attempt == maxLate {
			t.Fatalf("%d attempts in a row with a renewal later than the TTL %v: runner too loaded to test", maxLate, ttl)
		}
		key := fmt.Sprintf("group%d", attempt)
		a := lease(t, akv, "a", LeaseConfig{TTL: ttl, Key: key})
		var aHeldAtGain atomic.Bool
		b := lease(t, bkv, "b", LeaseConfig{TTL: ttl, Key: key, OnGain: func() { aHeldAtGain.Store(a.Held()) }})
		if ok, err := a.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("a: acquire = %v, %v", ok, err)
		}
		// a renews on time for several TTLs: b never takes over.
		late := false
		for end := time.Now().Add(3 * ttl); !late && time.Now().Before(end); time.Sleep(b.Config().Retry) {
			renewed := time.Now()
			err := a.Renew(ctx)
			ok, berr := b.TryAcquire(ctx)
			since := time.Since(renewed)
			switch {
			case berr != nil:
				t.Fatal(berr)
			case err != nil && !errors.Is(err, ErrLost):
				t.Fatal(err)
			case (ok || err != nil) && since > ttl:
				t.Logf("attempt %d: renewal and takeover check %v apart, later than the TTL %v (loaded runner): again", attempt, since, ttl)
				late = true
			case err != nil:
				t.Fatalf("a lost the lease %v after renewing, within the TTL %v: %v", since, ttl, err)
			case ok:
				t.Fatalf("b took over a renewing holder %v after its renewal, within the TTL %v", since, ttl)
			}
		}
		if late {
			continue
		}
		renewed := time.Now()
		if err := a.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		awaitTakeover(t, ctx, b) // a stalls
		took := time.Since(renewed)
		t.Logf("takeover %v after the holder's last renewal (lease TTL %v, bucket expiry %v)", took, ttl, LeaseBucketMinTTL)
		if aHeldAtGain.Load() {
			t.Fatal("b gained while a still counted itself the holder")
		}
		if took < ttl {
			t.Fatalf("takeover %v after the last renewal, before the TTL %v", took, ttl)
		}
		if err := a.Renew(ctx); !errors.Is(err, ErrLost) {
			t.Fatalf("the stalled holder renews: %v, want ErrLost", err)
		}
		return
	}
}

// awaitTakeover tries to take the lease every Retry until l holds it.
// awaitTakeover retries l.TryAcquire until it takes the lease and returns
// when the successful call began: the holding counts from then, for
// TTL - Margin.
func awaitTakeover(t *testing.T, ctx context.Context, l *Lease) time.Time {
	t.Helper()
	for start := time.Now(); ; time.Sleep(l.Config().Retry) {
		began := time.Now()
		ok, err := l.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return began
		}
		if time.Since(start) > waitLimit {
			t.Fatal("no takeover")
		}
	}
}

// TestLeaseRun: two instances running Run; exactly one holds at a time;
// cancelling the holder's Run releases the lease and the other takes it.
func TestLeaseRun(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	_, akv := bucket(t, s, testTTL)
	_, bkv := bucket(t, s, testTTL)
	var gained atomic.Int32 // 1: a, 2: b
	a := lease(t, akv, "a", LeaseConfig{OnGain: func() { gained.CompareAndSwap(0, 1) }})
	b := lease(t, bkv, "b", LeaseConfig{OnGain: func() { gained.CompareAndSwap(0, 2) }})
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan struct{})
	go func() { a.Run(actx, func(err error) { t.Log(err) }); close(adone) }()
	waitFor(t, "a holds", a.Held)
	bctx, bcancel := context.WithCancel(context.Background())
	bdone := make(chan struct{})
	go func() { b.Run(bctx, func(err error) { t.Log(err) }); close(bdone) }()
	defer func() { bcancel(); <-bdone }()
	// b keeps trying for several retries and does not take a held lease.
	time.Sleep(5 * b.Config().Retry)
	if b.Held() || !a.Held() {
		t.Fatalf("a holds %v, b holds %v: want a only", a.Held(), b.Held())
	}
	acancel()
	<-adone
	if a.Held() {
		t.Fatal("a holds after its Run ended")
	}
	waitFor(t, "b holds", b.Held)
	if gained.Load() != 1 {
		t.Fatalf("first gain by %d, want a (1)", gained.Load())
	}
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowGetKV delays its first Get's request by running before first (the
// request on a slow network while the holder renews) and records when
// that Get answered.
type slowGetKV struct {
	jetstream.KeyValue
	before   func()
	answered time.Time
}

func (k *slowGetKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	f := k.before
	if f == nil {
		return k.KeyValue.Get(ctx, key)
	}
	k.before = nil
	f()
	e, err := k.KeyValue.Get(ctx, key)
	k.answered = time.Now()
	return e, err
}

// TestLeaseTakeoverClockAfterAnswer: a standby's lookup whose request takes
// longer than the TTL, while the holder renews, answers a revision the
// holder wrote just before; the standby's takeover clock starts at that
// answer, so it does not take the lease from the live holder on its next
// try. A try later than TTL after that answer (the machine paused the
// test) may take it rightly: the scenario then runs again, at most
// takeoverRuns times.
func TestLeaseTakeoverClockAfterAnswer(t *testing.T) {
	const (
		ttl          = time.Second
		takeoverRuns = 3
	)
	for run := 1; ; run++ {
		if takeoverClockRun(t, ttl) {
			return
		}
		if run == takeoverRuns {
			t.Fatalf("each of %d runs paused longer than the TTL between the standby's tries", takeoverRuns)
		}
	}
}

// takeoverClockRun runs TestLeaseTakeoverClockAfterAnswer's scenario once
// and reports whether it could judge: the standby's second try came within
// ttl of its first try's answer.
func takeoverClockRun(t *testing.T, ttl time.Duration) bool {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	nc, kv := bucket(t, s, time.Second)
	ctx := ctxT(t)
	a := lease(t, kv, "a", LeaseConfig{TTL: ttl})
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("a: acquire = %v, %v", ok, err)
	}
	slow := &slowGetKV{KeyValue: kv, before: func() {
		for range 2 {
			time.Sleep(ttl * 6 / 10)
			if err := a.Renew(ctx); err != nil {
				t.Errorf("a renews: %v", err)
			}
		}
	}}
	b := lease(t, slow, "b", LeaseConfig{TTL: ttl})
	if ok, err := b.TryAcquire(ctx); ok || err != nil {
		t.Fatalf("b's first try while a renews: acquire = %v, %v", ok, err)
	}
	ok, err := b.TryAcquire(ctx)
	if since := time.Since(slow.answered); since > ttl {
		t.Logf("b's second try ended %v after its first try's answer, past the TTL %v: not judged", since, ttl)
		nc.Close()
		return false
	}
	if ok || err != nil {
		t.Fatalf("b's second try within the TTL of its first try's answer: acquire = %v, %v", ok, err)
	}
	// a still holds it in the bucket, whatever its own clock says after a
	// pause: its entry is the one it last wrote.
	e, err := kv.Get(ctx, "group")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := HolderOf(e.Value()); err != nil || h != "a" || e.Revision() != a.Revision() {
		t.Fatalf("the lease entry of %q at revision %d, want a's at %d (%v)", h, e.Revision(), a.Revision(), err)
	}
	return true
}

// TestLeaseBucketRecreated: the lease bucket is deleted while a holds the
// lease and b waits; the instances open it anew after a TTL without an
// answer, and one of them holds the lease again.
func TestLeaseBucketRecreated(t *testing.T) {
	s := embedtest.JetStreamServer(t, embednats.Options{})
	nc, kv := bucket(t, s, testTTL)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 500 * time.Millisecond
	recreate := func(ctx context.Context) (jetstream.KeyValue, error) { return LeaseBucket(ctx, js, "leases", ttl) }
	a := lease(t, kv, "a", LeaseConfig{TTL: ttl, Recreate: recreate})
	b := lease(t, kv, "b", LeaseConfig{TTL: ttl, Recreate: recreate})
	ctx, cancel := context.WithCancel(context.Background())
	var errs atomic.Int32
	var done [2]chan struct{}
	for i, l := range []*Lease{a, b} {
		done[i] = make(chan struct{})
		go func() { l.Run(ctx, func(error) { errs.Add(1) }); close(done[i]) }()
	}
	defer func() { cancel(); <-done[0]; <-done[1] }()
	waitFor(t, "a or b holds", func() bool { return a.Held() || b.Held() })
	if err := js.DeleteKeyValue(ctxT(t), "leases"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "neither holds the lost lease", func() bool { return !a.Held() && !b.Held() })
	waitFor(t, "a holder in the recreated bucket", func() bool {
		kv, err := js.KeyValue(ctxT(t), "leases")
		if err != nil {
			return false
		}
		e, err := kv.Get(ctxT(t), "group")
		if err != nil {
			return false
		}
		h, err := HolderOf(e.Value())
		return err == nil && (h == "a" && a.Held() || h == "b" && b.Held())
	})
	if errs.Load() == 0 {
		t.Fatal("the lost bucket was not reported")
	}
}
