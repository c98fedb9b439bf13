package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/serve/standby"
	"rgcpred/stream"
)

// windowKey identifies a decision: a cell's window.
type windowKey struct {
	cell int32
	end  int64
}

// authRun is what the device received in one run: every decision, keyed
// by its window, those received twice, and those received after a later
// window of the same cell (late).
type authRun struct {
	mu      sync.Mutex
	got     map[windowKey]stream.Decision
	twice   int
	invalid int
	late    int
	lastEnd map[int32]int64
}

// receive subscribes p to its decisions into a new authRun.
func receive(t *testing.T, p *stream.Publisher) *authRun {
	t.Helper()
	r := &authRun{got: map[windowKey]stream.Decision{}, lastEnd: map[int32]int64{}}
	sub, err := p.SubscribeDecisions(func(ds *stream.Decisions, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.invalid++
			return
		}
		for _, d := range ds.Decisions {
			k := windowKey{d.Cell, d.End}
			if _, ok := r.got[k]; ok {
				r.twice++
			}
			if e, ok := r.lastEnd[d.Cell]; ok && d.End < e {
				r.late++
			}
			r.lastEnd[d.Cell] = max(r.lastEnd[d.Cell], d.End)
			d.DecidedAt = 0 // the deciding instance's clock
			r.got[k] = d
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// wait waits until the run holds n spikes before hi, then for decisions
// still on their way (a duplicate among them).
func (r *authRun) wait(t *testing.T, hi int64, n int) {
	t.Helper()
	checkFor(t, waitLimit, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		k := 0
		for _, d := range r.got {
			if d.Kind == stream.KindSpike && d.Bin < hi {
				k++
			}
		}
		if k < n {
			return fmt.Errorf("%d of %d spikes received", k, n)
		}
		return nil
	})
	time.Sleep(standbyTTL)
}

// TestStandbyAuthenticated: a standby group of two with message keys
// serves a device that checks them. A forger without keys publishes
// decisions (plain, with the group's position headers, under another
// key), writes the lease, and answers a joining replica's state requests
// (with a state the holder gave it earlier, and with a fresh revision);
// then the holder is killed and the joiner takes over. The device acts only on signed
// decisions, each once, identical to those of an undisturbed single
// daemon with the same keys; every forgery is refused and counted by
// reason where it arrived.
func TestStandbyAuthenticated(t *testing.T) {
	if testing.Short() {
		t.Skip("hot-standby failover waits for a lease TTL")
	}
	t.Parallel() // waits for most of its time; independent of the other tests
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	ks := newKeys(t, "dev0")
	groupKey := make([]byte, msgauth.KeyLen)
	_, _ = rand.Read(groupKey)
	cfg := Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true, Keys: ks,
		StandbyKeys: map[string][]byte{"g": groupKey}}
	want := 0
	for _, w := range f.want {
		want += len(w)
	}
	device := func() *stream.Publisher {
		p := newPublisher(t, e, "dev0")
		if err := p.UseKeys(ks["dev0"]); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const chunk = 8
	n := (f.hi - f.lo + chunk - 1) / chunk
	send := func(p *stream.Publisher, between func(i int)) {
		if err := p.SendHistory(f.histories()); err != nil {
			t.Fatal(err)
		}
		for i, lo := 0, f.lo; lo < f.hi; i, lo = i+1, lo+chunk {
			between(i)
			if err := p.PublishFrames(f.frames(lo, min(lo+chunk, f.hi))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// The undisturbed single daemon, with replica cores as the group's.
	single := Config{Load: cfg.Load, MaxBatch: cfg.MaxBatch, PublishSilence: true, Stagger: true, Keys: ks, Replica: true}
	_, stopSingle := startService(t, &env{srv: e.srv, url: e.url}, single)
	p0 := device()
	base := receive(t, p0)
	send(p0, func(int) {})
	base.wait(t, int64(f.hi), want)
	stopSingle()
	p0.Conn().Close()

	a := startReplica(t, e.url, cfg, "a")
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	p := device()
	run := receive(t, p)

	forger, js := embedtest.Connect(t, e.url)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, standby.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	scope := standby.Scope("g", 0, 1)
	floodInbox := forger.NewRespInbox()
	other, _ := stream.NewAuth(newKeys(t, "dev0")["dev0"].Down)
	forgedDecisions, _ := stream.AppendDecisions(nil, &stream.Decisions{Decisions: []stream.Decision{
		{Cell: int32(f.ids[0]), Kind: stream.KindSpike, End: int64(f.lo) + 2000, Bin: int64(f.lo) + 2001, Prob: 1}}})
	var mu sync.Mutex
	var recorded *nats.Msg // a state answer the holder gave the forger
	stateAnswers := 0
	var b *replicaSvc

	send(p, func(i int) {
		switch i {
		case n / 8:
			// Forged decisions: plain, with the group's headers far ahead,
			// and with them under another key.
			far := stream.Pos{Epoch: 1, Bin: int64(f.hi) + 500}.String()
			headed := func() *nats.Msg {
				return &nats.Msg{Subject: stream.SpikesSubject("dev0"), Data: forgedDecisions, Header: nats.Header{
					stream.PosHeader: {far}, stream.GroupHeader: {scope}, stream.LeaseHeader: {"999999"}}}
			}
			signed := headed()
			other.Sign(signed)
			for _, m := range []*nats.Msg{{Subject: stream.SpikesSubject("dev0"), Data: forgedDecisions}, headed(), signed} {
				if err := forger.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
			}
			// The holder's state as of now, for a replay later.
			m, err := forger.Request(standby.StateSubject("g", "dev0"), nil, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			recorded = m
			mu.Unlock()
			// From now on the forger answers every state request first:
			// with the recorded state, and with a fresh revision.
			if _, err := forger.Subscribe(standby.StateSubject("g", "dev0"), func(req *nats.Msg) {
				mu.Lock()
				defer mu.Unlock()
				if req.Reply == "" || req.Reply == floodInbox {
					return
				}
				replay := &nats.Msg{Subject: req.Reply, Data: recorded.Data, Header: recorded.Header}
				fresh := &nats.Msg{Subject: req.Reply, Data: recorded.Data, Header: nats.Header{
					standby.IncarnationHeader: recorded.Header[standby.IncarnationHeader],
					stream.LeaseHeader:        {strconv.FormatUint(a.s.group.Lease().Revision(), 10)},
					standby.AuthHeader:        {base64.StdEncoding.EncodeToString([]byte("forged"))}}}
				for _, a := range []*nats.Msg{replay, fresh} {
					if forger.PublishMsg(a) == nil {
						stateAnswers++
					}
				}
			}); err != nil {
				t.Fatal(err)
			}
			if err := forger.Flush(); err != nil {
				t.Fatal(err)
			}
			// A lease value written without the group's key.
			v, _ := json.Marshal(standby.LeaseEntry{Holder: "mallory", Incarnation: "x", Since: time.Now().UTC()})
			if _, err := kv.Put(ctx, "g", v); err != nil {
				t.Fatal(err)
			}
			checkFor(t, waitLimit, func() error {
				return awaited("a refused the forged lease value and took the lease back",
					a.s.group.Alarms()[standby.AlarmLease] > 0 && a.s.group.Lease().Held())
			})
		case n / 4:
			// The forger's own requests take the holder's answers (one per
			// standby.StateEvery), so that b hears the forged ones first.
			stop := make(chan struct{})
			flooded := make(chan struct{})
			go func() {
				defer close(flooded)
				for {
					select {
					case <-stop:
						return
					default:
					}
					_ = forger.PublishRequest(standby.StateSubject("g", "dev0"), floodInbox, nil)
					time.Sleep(2 * time.Millisecond)
				}
			}()
			b = startReplica(t, e.url, cfg, "b")
			// Which answer b hears first depends on the scheduling of three
			// processes' goroutines on a loaded machine: b either refuses a
			// forged one (an alarm) or takes the holder's first. Either way
			// it must end with the holder's state, checked by the decisions
			// below; serve/standby's TestGroupStateOnlyFromHolder orders
			// the answers to prove the refusal itself.
			checkFor(t, waitLimit, func() error {
				return awaited("b refused a forged state answer or took the holder's",
					b.s.group.Alarms()[standby.AlarmState] > 0 || b.s.devices[0].sb.Synced())
			})
			close(stop)
			<-flooded
			checkFor(t, waitLimit, func() error { return awaited("b caught up", b.s.devices[0].sb.Synced()) })
		case n / 2:
			if !a.s.group.Lease().Held() {
				t.Fatal("b took the lease from a live holder")
			}
			a.kill() // b, which restored the holder's state, takes over
		}
	})
	checkFor(t, waitLimit, func() error {
		return awaited("b holds the lease", b.s.group.Lease().Held())
	})
	run.wait(t, int64(f.hi), want)

	run.mu.Lock()
	defer run.mu.Unlock()
	if run.twice != 0 || base.twice != 0 {
		t.Errorf("decisions received twice: %d in the group's run, %d in the single daemon's", run.twice, base.twice)
	}
	if len(run.got) != len(base.got) {
		t.Errorf("%d decisions from the group, %d from the single daemon", len(run.got), len(base.got))
	}
	for k, d := range base.got {
		if g, ok := run.got[k]; !ok || g != d {
			t.Fatalf("cell %d, window ending %d: the group's decision %+v (received %v), the single daemon's %+v", k.cell, k.end, g, ok, d)
		}
	}
	sameSpikes(t, spikesBefore(decisionsOf(run.got), f.hi), f.want)

	// The device refused the forged decisions by reason; the replicas the
	// forged positions, the joining replica the forged states.
	if d := p.Dropped(); d.AuthMissing != 2 || d.AuthInvalid != 1 || d.Ahead != 0 {
		t.Errorf("device dropped %+v: want 2 decisions messages without an authenticator, 1 under another key", d)
	}
	if run.invalid != 0 {
		t.Errorf("%d undecodable decisions messages passed the device's check", run.invalid)
	}
	// a saw the forged positions (b joined later).
	if gs := a.s.devices[0].sb.Gate().Stats(); gs.AuthMissing != 1 || gs.AuthInvalid != 1 || gs.Ahead != 0 {
		t.Errorf("a's gate stats %+v: want the forged positions refused, 1 without an authenticator and 1 under another key", gs)
	}
	if v := gathered(t, a.s, "predictord_standby_ignored_total"); v != 2 {
		t.Errorf("ignored positions exported: %v, want 2", v)
	}
	if r := b.s.devices[0].sb.Restores(); r != 1 {
		t.Errorf("b restored %d states, want the holder's only", r)
	}
	mu.Lock()
	t.Logf("%d decisions, each once, equal the single daemon's; the forger's %d state answers refused by b (alarms %v); a's alarms %v",
		len(run.got), stateAnswers, b.s.group.Alarms(), a.s.group.Alarms())
	mu.Unlock()
	for _, r := range []*replicaSvc{a, b} {
		if n := r.s.group.Alarms()[standby.AlarmDivergence]; n != 0 {
			t.Errorf("%s: %d divergence alarms", r.s.group.Config().ID, n)
		}
	}
}

// decisionsOf returns the decisions of a run in window order.
func decisionsOf(m map[windowKey]stream.Decision) []stream.Decision {
	out := make([]stream.Decision, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y stream.Decision) int { return cmp.Compare(x.End, y.End) })
	return out
}

// TestStandbyKeysNeedGroupKey: with message keys, a standby group without
// its key in the key file is refused with what to add; with it, the
// group's Authenticator and the devices' Down keys are configured.
func TestStandbyKeysNeedGroupKey(t *testing.T) {
	f := getFixture(t)
	groupKey := newKeys(t, "g")["g"].Up
	for _, c := range []struct {
		name    string
		keys    map[string][]byte
		wantErr string
	}{
		{"no group key", nil, `"g standby <64 hex digits>"`},
		{"another group's key", map[string][]byte{"h": groupKey}, `"g standby <64 hex digits>"`},
		{"the group's key", map[string][]byte{"g": groupKey}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Config{Load: fakeLoader(f.ids), Devices: []string{"dev0"}, Replica: true, Keys: newKeys(t, "dev0"), StandbyKeys: c.keys})
			if err != nil {
				t.Fatal(err)
			}
			gc := standby.GroupConfig{Group: "g"}
			err = s.standbyKeys(&gc)
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case gc.Auth == nil || gc.DeviceAuth == nil || gc.DeviceAuth("dev0") != s.devices[0].down || s.groupAuth == nil:
				t.Fatalf("group config %+v: want the group's Authenticator and the device's Down key", gc)
			}
		})
	}
}
