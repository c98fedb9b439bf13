package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// TestEndToEndEqualsOfflineRollout: frames in over NATS, spikes out, equal
// to rollout.Run's spikes for the same stimulus, predictor and histories.
func TestEndToEndEqualsOfflineRollout(t *testing.T) {
	for _, stagger := range []bool{false, true} {
		t.Run(fmt.Sprintf("stagger %v", stagger), func(t *testing.T) { testEndToEnd(t, stagger) })
	}
}

func testEndToEnd(t *testing.T, stagger bool) {
	f := getFixtureStagger(t, stagger)
	e := startNATS(t)
	s, _ := startService(t, e, Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: stagger})
	p := newPublisher(t, e, "dev0")
	// The status tells the device the start rule and each cell's place in
	// the whole list, so it can send the right histories.
	st, err := p.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Stagger != stagger || int(st.Total) != len(f.ids) {
		t.Fatalf("status: stagger %v, %d cells; want %v, %d", st.Stagger, st.Total, stagger, len(f.ids))
	}
	for k, c := range st.Cells {
		i := slices.Index(f.ids, int(c))
		if want := f.starts[i] - (f.lo + rgc.WindowBins - 1); rollout.StartOffsets([]int{st.Index(k)}, int(st.Total), st.Stagger)[0] != want {
			t.Fatalf("status cell %d: offset from status differs from the rollout's %d", c, want)
		}
	}
	col := collectAll(t, p)
	publishSplit(t, f, p, 50, nil)
	got := waitSpikes(t, col, f.hi, f.nSpike)
	sameSpikes(t, got, f.want)
	waitProcessed(t, p, int64(f.hi-1))
	if col.Errors() != 0 {
		t.Fatalf("%d undecodable decision messages", col.Errors())
	}
	// Silence decisions are published too, and every decision's echo and
	// timing fields are filled.
	var silence int
	for _, d := range col.Decisions() {
		if d.Kind == stream.KindSilence {
			silence++
		}
		if d.FrameTime != d.End || d.DecidedAt == 0 {
			t.Fatalf("decision %+v: frame time echo or decision time missing", d)
		}
	}
	if silence == 0 {
		t.Fatal("no silence decisions published")
	}
	reg := s.Registry()
	if n := value(t, s.m.framesIn.WithLabelValues("dev0")); n != float64(f.hi-f.lo) {
		t.Fatalf("frames metric %v, want %d", n, f.hi-f.lo)
	}
	if n := value(t, s.m.spikes.WithLabelValues("dev0")); n < float64(f.nSpike) {
		t.Fatalf("spikes metric %v < %d", n, f.nSpike)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lat uint64
	for _, fam := range fams {
		if fam.GetName() == "predictord_decision_latency_seconds" {
			lat = fam.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	if lat < uint64(f.nSpike) {
		t.Fatalf("latency histogram has %d samples, want at least %d", lat, f.nSpike)
	}
	t.Logf("%d spikes of %d cells over %d frames equal to the offline rollout", f.nSpike, len(f.ids), f.hi-f.lo)
}

// TestHostilePayloads sends malformed and hostile messages from a separate
// client between the good frames: the daemon's spikes stay those of the
// offline rollout and every bad message is counted by reason.
func TestHostilePayloads(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	s, _ := startService(t, e, Config{Load: fakeLoader(f.ids)})
	p := newPublisher(t, e, "dev0")
	bad := newPublisher(t, e, "dev0")
	col := collectAll(t, p)

	good, _ := stream.AppendFrames(nil, f.frames(f.lo, f.lo+2))
	mut := func(fn func(b []byte)) []byte { b := append([]byte(nil), good...); fn(b); return b }
	hugeCtl := make([]byte, stream.ControlHeaderLen+(stream.MaxCellsPerMsg+1)*stream.HistoryLen)
	hugeCtl[0], hugeCtl[1] = 1, stream.TypeControl
	unknown, _ := stream.AppendControl(nil, &stream.Control{Op: stream.OpHistory, Histories: []stream.History{{Cell: 99999}}})
	late, _ := stream.AppendControl(nil, &stream.Control{Op: stream.OpHistory, Histories: []stream.History{{Cell: int32(f.ids[0])}}})
	cases := []struct {
		kind    string
		payload []byte
		reason  string
	}{
		{"stim", nil, "truncated"},
		{"stim", []byte("hello, daemon"), "version"},
		{"stim", mut(func(b []byte) { b[0] = 2 }), "version"},
		{"stim", mut(func(b []byte) { b[1] = 9 }), "type"},
		{"stim", good[:len(good)-3], "truncated"},
		{"stim", append(append([]byte(nil), good...), 1, 2, 3), "length"},
		{"stim", make([]byte, 1<<20), "oversized"},
		{"stim", mut(func(b []byte) { b[7] = 1 }), "reserved"},
		{"stim", mut(func(b []byte) { b[len(b)-1] = 0x7f; b[len(b)-2] = 0xc0 }), "non_finite"}, // NaN
		{"stim", mut(func(b []byte) { b[15] = 0x80 }), "range"},                                // negative seq
		{"ctl", []byte{1, 3, 0, 0, 7, 0, 0, 0}, "range"},                                       // unknown op
		{"ctl", hugeCtl, "oversized"},
		{"ctl", unknown, "unknown_cell"},
		{"ctl", late, "history_late"},
	}
	want := map[string]float64{}
	publishSplit(t, f, p, 40, func(i int) {
		// After the first window is due, send one hostile message
		// between good messages, and duplicates of old frames.
		if i < 30 || i-30 >= len(cases) {
			return
		}
		c := cases[i-30]
		if err := p.Flush(context.Background()); err != nil { // order: good frames first
			t.Fatal(err)
		}
		if err := bad.PublishRaw(c.kind, c.payload); err != nil {
			t.Fatal(err)
		}
		if err := bad.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		want[c.reason]++
		cur := f.lo + i*40                                                  // the good stream has reached cur-1
		if err := bad.PublishFrames(f.frames(cur-30, cur-20)); err != nil { // stale duplicates
			t.Fatal(err)
		}
		if err := bad.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		want["stale"] += 10
	})
	got := waitSpikes(t, col, f.hi, f.nSpike)
	sameSpikes(t, got, f.want)
	waitProcessed(t, p, int64(f.hi-1))
	for reason, n := range want {
		if g := value(t, s.m.rejected.WithLabelValues("dev0", reason)); g != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, g, n)
		}
	}
}

// TestTwoShards: two daemons with --shard 0/2 and 1/2 serve every cell
// exactly once, and together produce the offline rollout's spikes.
func TestTwoShards(t *testing.T) {
	for _, stagger := range []bool{false, true} {
		t.Run(fmt.Sprintf("stagger %v", stagger), func(t *testing.T) { testTwoShards(t, stagger) })
	}
}

func testTwoShards(t *testing.T, stagger bool) {
	f := getFixtureStagger(t, stagger)
	e := startNATS(t)
	s0, _ := startService(t, e, Config{Load: fakeLoader(f.ids), Shard: 0, Shards: 2, Stagger: stagger})
	s1, _ := startService(t, e, Config{Load: fakeLoader(f.ids), Shard: 1, Shards: 2, Stagger: stagger})
	c0, c1 := s0.Cells(), s1.Cells()
	all := append(slices.Clone(c0), c1...)
	slices.Sort(all)
	ids := slices.Sorted(slices.Values(f.ids))
	if !slices.Equal(all, ids) || len(c0) != len(f.ids)/2 {
		t.Fatalf("shards serve %v and %v; want a partition of %v", c0, c1, ids)
	}
	p := newPublisher(t, e, "dev0")
	col := collectAll(t, p)
	publishSplit(t, f, p, 64, nil)
	got := waitSpikes(t, col, f.hi, f.nSpike)
	sameSpikes(t, got, f.want)
	// Each cell's decisions come once: the count equals the offline count
	// (checked above, a duplicate would add bins), and each shard only
	// decided for its own cells.
	if n0, n1 := value(t, s0.m.spikes.WithLabelValues("dev0")), value(t, s1.m.spikes.WithLabelValues("dev0")); n0 == 0 || n1 == 0 {
		t.Fatalf("shard spike counts %v and %v: one shard idle", n0, n1)
	}
}

func TestSelectCells(t *testing.T) {
	known := []int{9, 3, 5, 1, 7}
	cases := []struct {
		filter        []int
		shard, shards int
		want          []int
		err           bool
	}{
		{nil, 0, 1, []int{1, 3, 5, 7, 9}, false},
		{nil, 0, 2, []int{1, 5, 9}, false},
		{nil, 1, 2, []int{3, 7}, false},
		{[]int{9, 3}, 0, 1, []int{3, 9}, false},
		{[]int{4}, 0, 1, nil, true},
		{nil, 2, 2, nil, true},
		{[]int{3}, 1, 2, nil, true},
	}
	for _, c := range cases {
		got, err := SelectCells(known, c.filter, c.shard, c.shards)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("SelectCells(%v, %d/%d) = %v, %v; want %v (error %v)", c.filter, c.shard, c.shards, got, err, c.want, c.err)
		}
	}
}

// TestMetricsHealthReady: /metrics parses as Prometheus text exposition and
// names the documented metrics; /healthz and /readyz answer.
func TestMetricsHealthReady(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	s, stop := startService(t, e, Config{Load: fakeLoader(f.ids)})
	p := newPublisher(t, e, "dev0")
	// The malformed message goes between the two batches: messages on one
	// subject from one connection arrive in order, so once the last frame
	// is processed the rejection has been counted.
	if err := p.PublishFrames(f.frames(f.lo, f.lo+1000)); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishRaw("stim", []byte{0}); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishFrames(f.frames(f.lo+1000, f.lo+1100)); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, p, int64(f.lo+1099))
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	get := func(path string) (int, string) {
		r, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not valid exposition: %v", err)
	}
	for _, name := range []string{"predictord_frames_total", "predictord_frames_rejected_total", "predictord_predictions_total",
		"predictord_batch_size", "predictord_decision_latency_seconds", "predictord_cells_served", "predictord_ready"} {
		if fams[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	if g := fams["predictord_cells_served"].GetMetric()[0].GetGauge().GetValue(); g != float64(len(f.ids)) {
		t.Errorf("cells served %v, want %d", g, len(f.ids))
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d while serving", code)
	}
	stop()
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz %d after stop, want 503", code)
	}
}

// TestReload: a valid new checkpoint replaces the model without touching
// the cells' states; an invalid one is refused and the old model stays.
func TestReload(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	var mu sync.Mutex
	mode := "ok"
	loads := 0
	load := func(path string, maxBatch int) (*Model, error) {
		mu.Lock()
		defer mu.Unlock()
		loads++
		switch mode {
		case "missing":
			return nil, fmt.Errorf("open %s: no such file", path)
		case "fewer cells":
			return &Model{Predictor: fakepred.New(f.ids[1:]), Cells: f.ids[1:]}, nil
		case "nan":
			return &Model{Predictor: &failing{}, Cells: f.ids}, nil
		}
		return &Model{Predictor: fakepred.New(f.ids), Cells: f.ids, Name: fmt.Sprint("fake ", loads)}, nil
	}
	s, _ := startService(t, e, Config{Load: load, ModelPath: "x.ckpt"})
	p := newPublisher(t, e, "dev0")
	col := collectAll(t, p)
	publishSplit(t, f, p, 100, func(i int) {
		if i%10 != 5 {
			return
		}
		mu.Lock()
		mode = []string{"ok", "missing", "fewer cells", "nan"}[(i/10)%4]
		m := mode
		mu.Unlock()
		err := s.Reload()
		if (err == nil) != (m == "ok") {
			t.Errorf("reload in mode %q: %v", m, err)
		}
	})
	// Reloading the same (deterministic) model keeps every cell's state:
	// the spikes are still the offline rollout's.
	got := waitSpikes(t, col, f.hi, f.nSpike)
	sameSpikes(t, got, f.want)
	if ok, bad := value(t, s.m.reloads.WithLabelValues("ok")), value(t, s.m.reloads.WithLabelValues("error")); ok < 1 || bad < 3 {
		t.Fatalf("reloads ok %v error %v", ok, bad)
	}
}

type failing struct{}

func (failing) Predict(b *rgc.Batch, out []float32) error {
	for i := range out {
		out[i] = 0
	}
	return nil
}

// slow wraps a predictor and sleeps per call, to overload the daemon.
type slow struct {
	p rgc.Predictor
	d time.Duration
}

func (s *slow) Predict(b *rgc.Batch, out []float32) error {
	time.Sleep(s.d)
	return s.p.Predict(b, out)
}

// TestOverload: with a model far slower than the frame rate and frames
// arriving in a burst, the daemon skips stale decisions (counted), keeps up
// with the stream and keeps answering.
func TestOverload(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	load := func(string, int) (*Model, error) {
		return &Model{Predictor: &slow{p: fakepred.New(f.ids), d: 3 * time.Millisecond}, Cells: f.ids}, nil
	}
	s, _ := startService(t, e, Config{Load: load, MaxLag: 40})
	p := newPublisher(t, e, "dev0")
	// A burst of ~4600 frames at once: far ahead of a 3 ms model.
	mid := f.hi - 400
	for lo := f.lo; lo < mid; lo += 10 {
		if err := p.PublishFrames(f.frames(lo, min(lo+10, mid))); err != nil {
			t.Fatal(err)
		}
	}
	waitProcessed(t, p, int64(mid-1))
	misses := value(t, s.m.skipped.WithLabelValues("dev0"))
	preds := value(t, s.m.predictions.WithLabelValues("dev0"))
	if misses == 0 {
		t.Fatalf("no deadline misses under overload (predictions %v)", preds)
	}
	// Then frames at about the real rate (1 per ms): the daemon has caught
	// up and predicts again.
	for b := mid; b < f.hi; b++ {
		if err := p.PublishFrames(f.frames(b, b+1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	waitProcessed(t, p, int64(f.hi-1))
	preds2 := value(t, s.m.predictions.WithLabelValues("dev0"))
	misses2 := value(t, s.m.skipped.WithLabelValues("dev0"))
	if preds2 <= preds {
		t.Fatalf("no predictions after the burst (misses %v -> %v)", misses, misses2)
	}
	t.Logf("burst: %v predictions, %v misses; paced 400 frames: %v predictions, %v misses", preds, misses, preds2-preds, misses2-misses)
}

// TestDrain: cancelling Run processes what was received, then returns nil.
func TestDrain(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	s, stop := startService(t, e, Config{Load: fakeLoader(f.ids)})
	p := newPublisher(t, e, "dev0")
	publishSplit(t, f, p, 100, nil)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, p, int64(f.lo)) // the daemon has started
	stop()
	if got := value(t, s.m.framesIn.WithLabelValues("dev0")); got <= 0 {
		t.Fatalf("frames processed %v", got)
	}
	if _, err := p.Status(context.Background()); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("status after drain: %v, want no responders", err)
	}
}

func TestNewRejects(t *testing.T) {
	ids := []int{1, 2}
	for _, cfg := range []Config{
		{Load: fakeLoader(ids)},
		{Devices: []string{"a.b"}, Load: fakeLoader(ids)},
		{Devices: []string{"d", "d"}, Load: fakeLoader(ids)},
		{Devices: []string{"d"}},
		{Devices: []string{"d"}, Load: fakeLoader(ids), Cells: []int{3}},
		{Devices: []string{"d"}, Load: func(string, int) (*Model, error) { return nil, errors.New("no file") }},
		{Devices: []string{"d"}, Load: func(string, int) (*Model, error) { return &Model{Predictor: failing{}, Cells: ids}, nil }},
	} {
		cfg.Log = zerolog.New(io.Discard)
		cfg.Registry = prometheus.NewRegistry()
		if _, err := New(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestTwoDevices: one daemon serving two devices keeps their streams apart;
// each device gets the offline rollout's spikes for its own stream.
func TestTwoDevices(t *testing.T) {
	f := getFixture(t)
	e := startNATS(t)
	startService(t, e, Config{Load: fakeLoader(f.ids), Devices: []string{"left", "right"}})
	pl, pr := newPublisher(t, e, "left"), newPublisher(t, e, "right")
	cl, cr := collectAll(t, pl), collectAll(t, pr)
	// The right device's stream is the left's shifted by 5000 in seq: the
	// same stimulus and histories, so the same spikes 5000 bins later.
	publishSplit(t, f, pl, 100, nil)
	if err := pr.SendHistory(f.histories()); err != nil {
		t.Fatal(err)
	}
	for lo := f.lo; lo < f.hi; lo += 70 {
		fr := f.frames(lo, min(lo+70, f.hi))
		fr.FirstSeq += 5000
		if err := pr.PublishFrames(fr); err != nil {
			t.Fatal(err)
		}
	}
	sameSpikes(t, waitSpikes(t, cl, f.hi, f.nSpike), f.want)
	shifted := map[int][]int64{}
	for cell, bins := range f.want {
		for _, b := range bins {
			shifted[cell] = append(shifted[cell], b+5000)
		}
	}
	sameSpikes(t, waitSpikes(t, cr, f.hi+5000, f.nSpike), shifted)
}
