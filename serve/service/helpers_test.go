package service

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
	"rgcpred/serve/embednats"
	"rgcpred/stream"
)

// shipped is the shipped recording, loaded once for this package's tests.
var shipped = testrec.Loader{Dir: "../../data/chicken-17-08-21"}

// smallRecording is the first bins bins of the shipped recording.
func smallRecording(t testing.TB, bins int) *rgc.Recording {
	return shipped.Prefix(t, bins)
}

// fixture is a recording, the cells to serve and the offline rollout's
// spikes for them with the fake predictor.
type fixture struct {
	rec    *rgc.Recording
	idx    []int // recording cell indices
	ids    []int // cluster ids
	lo, hi int   // the test split's bins
	want   map[int][]int64
	nSpike int
	// stagger: the rollout ran with staggered starts; starts[i] is the end
	// of cell i's first window.
	stagger bool
	starts  []int
}

var (
	fixMu sync.Mutex
	fixes = map[bool]*fixture{}
)

// getFixture returns the fixture with simultaneous starts.
func getFixture(t *testing.T) *fixture { return getFixtureStagger(t, false) }

// getFixtureStagger returns the fixture whose offline rollout starts the
// cells staggered (rollout.Options.Stagger) or not.
func getFixtureStagger(t *testing.T, stagger bool) *fixture {
	fixMu.Lock()
	defer fixMu.Unlock()
	if f := fixes[stagger]; f != nil {
		return f
	}
	rec := smallRecording(t, 50000)
	f := &fixture{rec: rec, idx: rec.QualityCells()[:8], want: map[int][]int64{}, stagger: stagger}
	for _, c := range f.idx {
		f.ids = append(f.ids, rec.Cells[c].ClusterID)
	}
	off, err := rollout.Run(context.Background(), rec, fakepred.New(f.ids), rollout.Options{Split: rgc.Test, Cells: f.idx, Stagger: stagger})
	if err != nil {
		t.Fatal(err)
	}
	f.lo, f.hi = rec.SplitRange(rgc.Test)
	for i, tr := range off.Trains {
		f.starts = append(f.starts, tr.Start)
		for j, v := range tr.Generated {
			if v == 1 && off.From+j > tr.Start { // before Start: the recorded history
				f.want[f.ids[i]] = append(f.want[f.ids[i]], int64(off.From+j))
				f.nSpike++
			}
		}
	}
	fixes[stagger] = f
	return f
}

// histories returns the recorded spike row of every cell's first window.
func (f *fixture) histories() []stream.History {
	var out []stream.History
	for i, c := range f.idx {
		t0 := f.starts[i]
		h := stream.History{Cell: int32(f.rec.Cells[c].ClusterID)}
		for _, b := range f.rec.Cells[c].SpikeBins {
			if int(b) >= t0-(rgc.WindowBins-1) && int(b) <= t0 {
				h.Spikes[int(b)-(t0-(rgc.WindowBins-1))] = true
			}
		}
		out = append(out, h)
	}
	return out
}

func (f *fixture) frames(from, to int) *stream.Frames {
	fr := &stream.Frames{FirstSeq: int64(from), Frames: make([]stream.Frame, to-from)}
	for b := from; b < to; b++ {
		x := &fr.Frames[b-from]
		x.Time = int64(b)
		for c := range x.LED {
			x.LED[c] = f.rec.Stimulus[c][b]
		}
	}
	return fr
}

// spikesBefore returns each cell's spike bins below the split's end.
func spikesBefore(ds []stream.Decision, hi int) map[int][]int64 {
	out := map[int][]int64{}
	for _, d := range ds {
		if d.Kind == stream.KindSpike && d.Bin < int64(hi) {
			out[int(d.Cell)] = append(out[int(d.Cell)], d.Bin)
		}
	}
	return out
}

type env struct {
	srv *server.Server
	url string
}

func startNATS(t *testing.T) *env {
	t.Helper()
	s, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return &env{srv: s, url: s.ClientURL()}
}

func fakeLoader(ids []int) Loader {
	return func(path string, maxBatch int) (*Model, error) {
		return &Model{Predictor: fakepred.New(ids), Cells: ids, Name: "fake"}, nil
	}
}

// startService runs a service until the test ends; stop cancels and waits.
func startService(t *testing.T, e *env, cfg Config) (s *Service, stop func()) {
	t.Helper()
	if cfg.Devices == nil {
		cfg.Devices = []string{"dev0"}
	}
	cfg.Log = zerolog.New(io.Discard)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(e.url, s.ConnOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nc) }()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Ready() {
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("service not ready after 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
			nc.Close()
		})
	}
	t.Cleanup(stop)
	return s, stop
}

func newPublisher(t *testing.T, e *env, device string) *stream.Publisher {
	t.Helper()
	nc, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := stream.NewPublisher(nc, device)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitProcessed waits until the daemon has processed frame seq.
func waitProcessed(t *testing.T, p *stream.Publisher, seq int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		st, err := p.Status(ctx)
		if err == nil && st.LastSeq >= seq {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("frame %d not processed: last status %+v, %v", seq, st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// publishSplit sends the histories and the fixture's frames in chunks.
func publishSplit(t *testing.T, f *fixture, p *stream.Publisher, chunk int, between func(i int)) {
	t.Helper()
	if err := p.SendHistory(f.histories()); err != nil {
		t.Fatal(err)
	}
	for i, lo := 0, f.lo; lo < f.hi; i, lo = i+1, lo+chunk {
		if between != nil {
			between(i)
		}
		if err := p.PublishFrames(f.frames(lo, min(lo+chunk, f.hi))); err != nil {
			t.Fatal(err)
		}
	}
}

func collectAll(t *testing.T, p *stream.Publisher) *stream.Collector {
	t.Helper()
	c, err := p.Collect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func waitSpikes(t *testing.T, c *stream.Collector, hi, n int) map[int][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitFor(ctx, func(ds []stream.Decision) bool {
		k := 0
		for _, d := range ds {
			if d.Kind == stream.KindSpike && d.Bin < int64(hi) {
				k++
			}
		}
		return k >= n
	}); err != nil {
		t.Fatalf("%v (have %d decisions)", err, len(c.Decisions()))
	}
	settle(t, c)
	return spikesBefore(c.Decisions(), hi)
}

// settle waits until c has received no decision for 100 ms, so that
// decisions still on their way (a surplus among them) arrive before the
// caller compares; it fails after 20 s of decisions still arriving.
func settle(t *testing.T, c *stream.Collector) {
	t.Helper()
	const quiet = 100 * time.Millisecond
	deadline := time.Now().Add(20 * time.Second)
	n, since := len(c.Decisions()), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("decisions still arriving after 20 s (%d)", n)
		}
		time.Sleep(5 * time.Millisecond)
		if m := len(c.Decisions()); m != n {
			n, since = m, time.Now()
		}
	}
}

func sameSpikes(t *testing.T, got, want map[int][]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("spikes for %d cells, want %d", len(got), len(want))
	}
	for cell, w := range want {
		if !slices.Equal(got[cell], w) {
			t.Fatalf("cell %d: daemon spikes differ from the offline rollout\n got %v\nwant %v", cell, got[cell], w)
		}
	}
}
