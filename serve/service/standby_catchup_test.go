package service

import (
	"sync/atomic"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/recorder"
	"rgcpred/stream"
)

// slowPred makes its first n model calls take d each.
type slowPred struct {
	p     rgc.Predictor
	d     time.Duration
	n     int64
	calls atomic.Int64
}

func (s *slowPred) Predict(b *rgc.Batch, out []float32) error {
	if s.calls.Add(1) <= s.n {
		time.Sleep(s.d)
	}
	return s.p.Predict(b, out)
}

// TestStandbyLongMessageKeepsLease: the holder handles frames messages
// of 1024 frames whose model calls take several lease TTLs together (as
// a long gap's catch-up does), each call far shorter than the TTL. It
// keeps its lease all along (the standby never takes it over), and the
// device receives every decision once, equal to the offline rollout's.
// TestStandbyWedgedHolder is the other side: one call longer than the
// TTL loses the lease.
func TestStandbyLongMessageKeepsLease(t *testing.T) {
	const ttl = 300 * time.Millisecond
	f := getFixtureStagger(t, true)
	e := startJetStream(t)
	cfg := Config{Load: fakeLoader(f.ids), PublishSilence: true, Stagger: true}
	slow := &slowPred{p: fakepred.New(f.ids), d: 8 * time.Millisecond, n: 160}
	if time.Duration(slow.n)*slow.d < 4*ttl {
		t.Fatalf("the slow calls take %v together, want several TTLs", time.Duration(slow.n)*slow.d)
	}
	acfg := cfg
	acfg.Load = func(string, int) (*Model, error) { return &Model{Predictor: slow, Cells: f.ids, Name: "fake"}, nil }
	a := startReplicaTTL(t, e.url, acfg, "a", recorder.Config{}, ttl)
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	b := startReplicaTTL(t, e.url, cfg, "b", recorder.Config{}, ttl)
	checkFor(t, waitLimit, func() error { return awaited("b synced", b.s.devices[0].sb.Synced()) })
	p := newPublisher(t, e, "dev0")
	c := collectAll(t, p)
	start := time.Now()
	publishSplit(t, f, p, stream.MaxFramesPerMsg, nil)
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	d := a.s.devices[0]
	checkFor(t, waitLimit, func() error {
		return awaited("a processed every frame", d.last.Load() >= int64(f.hi-1) && !d.progress.busy())
	})
	if got := slow.calls.Load(); got < slow.n {
		t.Fatalf("%d model calls, want at least the %d slow ones", got, slow.n)
	}
	seen := map[[2]int64]bool{}
	for _, d := range c.Decisions() {
		k := [2]int64{int64(d.Cell), d.End}
		if seen[k] {
			t.Fatalf("decision of cell %d at %d received twice", d.Cell, d.End)
		}
		seen[k] = true
	}
	sa, _ := a.s.StandbyStatus()
	sb, _ := b.s.StandbyStatus()
	if !sa.Held || sa.Gains != 1 || sa.Losses != 0 || sb.Gains != 0 {
		t.Fatalf("after %v of messages of many calls: a's lease %+v, b's %+v; want a holding it all along", time.Since(start), sa, sb)
	}
}
