package replay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/model"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/serve/embednats"
	"rgcpred/stream"
)

// hashPredictor is a deterministic stand-in for a model: a one-hot
// distribution whose class depends on the window's recent stimulus and
// spike history, so that a wrong window (stimulus or history) changes the
// rollout.
type hashPredictor struct{}

func (hashPredictor) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		w := b.Inputs[i*rgc.WindowLen : (i+1)*rgc.WindowLen]
		var s float64
		for c := range rgc.StimChannels {
			for j := rgc.WindowBins - 40; j < rgc.WindowBins; j++ {
				s += float64(w[c*rgc.WindowBins+j]) * float64(j%7+c+1)
			}
		}
		var h int
		for j, v := range w[rgc.SpikeRow*rgc.WindowBins : (rgc.SpikeRow+1)*rgc.WindowBins] {
			if v != 0 {
				h += j
			}
		}
		k := (int(s*13) + h + b.Cells[i]) % (rgc.NumClasses + 40) // about a third no-spike
		k = min(k, rgc.NoSpikeClass)
		o := out[i*rgc.NumClasses : (i+1)*rgc.NumClasses]
		clear(o)
		o[k] = 1
	}
	return nil
}

// testRecording is a small in-memory recording: random LED frames of 50
// bins and Poisson-ish spikes.
func testRecording(bins int, ids []int, seed uint64) *rgc.Recording {
	r := rand.New(rand.NewPCG(seed, 1))
	rec := &rgc.Recording{Name: "test", SampleRateHz: rgc.SensorRateHz, Bins: bins}
	for c := range rec.Stimulus {
		rec.Stimulus[c] = make([]float32, bins)
		for b := 0; b < bins; b += 50 {
			v := float32(r.IntN(2))
			for j := b; j < min(b+50, bins); j++ {
				rec.Stimulus[c][j] = v
			}
		}
	}
	for _, id := range ids {
		var sb []int32
		for b := range bins {
			if r.Float64() < 0.01 {
				sb = append(sb, int32(b))
			}
		}
		rec.Cells = append(rec.Cells, rgc.Cell{ClusterID: id, Quality: true, SpikeBins: sb})
	}
	return rec
}

// fakeDaemon is a minimal single-goroutine daemon for one device, built on
// the shared per-cell state (rollout.Cell): it is here to test the replay's
// pacing, histories and flow control without predictord. It handles every
// subject of the device on one subscription, so control and frames are
// processed in publish order.
type fakeDaemon struct {
	nc    *nats.Conn
	dev   string
	p     rgc.Predictor
	cells []int
	delay time.Duration // extra processing time per frame with decisions

	// skipEvery > 0 publishes every skipEvery-th decision as skipped (and
	// counts it in the status); dropEvery > 0 sends no decision at all for
	// every dropEvery-th window.
	skipEvery, dropEvery int
	// mode is the stimulus mode the status announces.
	mode rgc.StimMode

	mu      sync.Mutex
	first   int64 // first frame sequence after a reset, -1 before
	stim    map[int64][rgc.StimChannels]float32
	hist    map[int32][]int32
	state   []rollout.Cell
	started bool
	epoch   uint32
	n       int    // decisions taken
	skipped uint64 // skipped decisions published
}

func startFakeDaemon(t *testing.T, url, dev string, p rgc.Predictor, cells []int, delay time.Duration) *fakeDaemon {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := &fakeDaemon{nc: nc, dev: dev, p: p, cells: cells, delay: delay, first: -1}
	if _, err := nc.Subscribe("rgc."+dev+".>", d.handle); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *fakeDaemon) handle(m *nats.Msg) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch m.Subject {
	case stream.StatusSubject(d.dev):
		st := stream.Status{LastSeq: -1, Shards: 1, Epoch: d.epoch, First: -1, Skipped: d.skipped, StimMode: d.mode}
		for _, c := range d.cells {
			st.Cells = append(st.Cells, int32(c))
		}
		b, _ := stream.AppendStatus(nil, &st)
		_ = m.Respond(b)
	case stream.ControlSubject(d.dev):
		var c stream.Control
		if err := stream.DecodeControl(m.Data, &c); err != nil {
			return
		}
		if c.Op == stream.OpReset {
			d.first, d.stim, d.hist, d.started = -1, map[int64][rgc.StimChannels]float32{}, map[int32][]int32{}, false
			return
		}
		for _, h := range c.Histories {
			var bins []int32
			for j, s := range h.Spikes {
				if s {
					bins = append(bins, int32(j)) // relative to the first frame
				}
			}
			d.hist[h.Cell] = bins
		}
	case stream.StimSubject(d.dev):
		var f stream.Frames
		if err := stream.DecodeFrames(m.Data, &f); err != nil {
			return
		}
		if d.first < 0 {
			d.first = f.FirstSeq
			d.epoch++
		}
		for i, fr := range f.Frames {
			seq := f.FirstSeq + int64(i)
			d.stim[seq] = fr.LED
			d.step(seq, fr.Time)
		}
	}
}

// step predicts every cell due at frame seq.
func (d *fakeDaemon) step(seq, frameTime int64) {
	end := d.first + rgc.WindowBins - 1
	if seq < end {
		return
	}
	if !d.started {
		d.started = true
		d.state = make([]rollout.Cell, len(d.cells))
		for i, id := range d.cells {
			var abs []int32
			for _, b := range d.hist[int32(id)] {
				abs = append(abs, b+int32(d.first))
			}
			d.state[i].Reset(id, int(end), abs)
		}
	}
	b := &rgc.Batch{}
	var idx []int
	for i := range d.state {
		if d.state[i].Due(int(seq)) {
			w := make([]float32, rgc.WindowLen)
			for j := range rgc.WindowBins {
				led := d.stim[seq-rgc.WindowBins+1+int64(j)]
				for c := range rgc.StimChannels {
					w[c*rgc.WindowBins+j] = led[c]
				}
			}
			d.state[i].History.FillRow(w[rgc.SpikeRow*rgc.WindowBins:])
			b.Inputs = append(b.Inputs, w...)
			b.Cells = append(b.Cells, d.state[i].ID)
			b.Ends = append(b.Ends, int(seq))
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	time.Sleep(d.delay)
	out := make([]float32, len(idx)*rgc.NumClasses)
	if err := d.p.Predict(b, out); err != nil {
		panic(err)
	}
	var ds stream.Decisions
	for j, i := range idx {
		d.n++
		k := model.Median(out[j*rgc.NumClasses : (j+1)*rgc.NumClasses])
		skip := d.skipEvery > 0 && d.n%d.skipEvery == 0
		if skip {
			k = rgc.NoSpikeClass
		}
		bin, spike := d.state[i].Advance(k)
		kind := uint8(stream.KindSilence)
		switch {
		case d.dropEvery > 0 && d.n%d.dropEvery == 0:
			continue
		case skip:
			kind = stream.KindSkipped
			d.skipped++
		case spike:
			kind = stream.KindSpike
		}
		ds.Decisions = append(ds.Decisions, stream.Decision{Cell: int32(d.state[i].ID), Kind: kind, End: seq, Bin: int64(bin), Prob: 1, FrameTime: frameTime, Epoch: uint16(d.epoch)})
	}
	if len(ds.Decisions) == 0 {
		return
	}
	p, _ := stream.AppendDecisions(nil, &ds)
	_ = d.nc.Publish(stream.SpikesSubject(d.dev), p)
}

func newPublisher(t *testing.T, url, dev string) *stream.Publisher {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := stream.NewPublisher(nc, dev)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// TestRunMatchesOfflineRollout replays a stretch through the fake daemon,
// unpaced (flow control) and paced at 4x real time, and checks that the
// predicted trains equal rollout.Run's for the same predictor and stretch.
func TestRunMatchesOfflineRollout(t *testing.T) {
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ids := []int{3, 8, 21}
	rec := testRecording(10_000, ids, 7)
	// Offline reference over the test split: bins 9000..10000 are too short
	// for a window, so use a custom stretch and compare to the rollout on a
	// recording cut to it.
	from, to := 2000, 4600
	cut := cutRecording(rec, from, to)
	off, err := rollout.Run(context.Background(), cut, hashPredictor{}, rollout.Options{Split: rgc.Train, Cells: []int{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	// rollout.Run's train split of the cut recording is its first 70%.
	_, trainTo := cut.SplitRange(rgc.Train)
	to = from + trainTo

	for _, tc := range []struct {
		name  string
		speed float64
		delay time.Duration
	}{
		{"as fast as possible", 0, 200 * time.Microsecond},
		{"paced 4x", 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := "dev" + string(rune('a'+int(tc.speed)))
			startFakeDaemon(t, srv.ClientURL(), dev, hashPredictor{}, ids, tc.delay)
			pub := newPublisher(t, srv.ClientURL(), dev)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := Run(ctx, pub, Config{Rec: rec, From: from, To: to, Cells: ids, Speed: tc.speed, DecisionTimeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.First+1-from != off.From || res.To-from != off.To {
				t.Fatalf("compared bins %d..%d, offline %d..%d (shifted by %d)", res.First+1, res.To, off.From, off.To, from)
			}
			for i, id := range ids {
				got := CountVector(res.Spikes[i], res.First+1, res.To)
				want := off.Trains[i].Generated
				nsp := 0
				for j := range want {
					nsp += int(want[j])
					if got[j] != want[j] {
						t.Fatalf("cell %d: bin %d: replay %v, offline %v", id, res.First+1+j, got[j], want[j])
					}
				}
				if nsp == 0 {
					t.Fatalf("cell %d: offline train has no spikes; the test is too weak", id)
				}
			}
			if res.Missing != 0 || res.Stale != 0 || res.Skipped != 0 || res.Foreign != 0 {
				t.Fatalf("missing %d stale %d skipped %d foreign %d", res.Missing, res.Stale, res.Skipped, res.Foreign)
			}
			if res.Latency.N != int(res.Decisions) || res.Decisions == 0 {
				t.Fatalf("%d latency samples for %d decisions", res.Latency.N, res.Decisions)
			}
			if tc.speed > 0 {
				if !res.Late.Paced || res.Pace.Frames != int64(to-res.First) {
					t.Fatalf("paced run: late %+v, %d paced frames, want %d", res.Late, res.Pace.Frames, to-res.First)
				}
				// The last frame is due (to-1-first) frames after the first
				// paced one, about 0.2 s at 4x real time.
				want := time.Duration(float64(to-1-res.First) / (rgc.BinRateHz * tc.speed) * float64(time.Second))
				if res.Wall < want || res.Wall > want+2*time.Second {
					t.Fatalf("paced run took %v, want about %v", res.Wall, want)
				}
			}
			t.Logf("%s: %d decisions, latency %+v, late %d/%d, pace max lag %v", tc.name, res.Decisions, res.Latency, res.Late.Late, res.Late.Spikes, res.Pace.MaxLag)
		})
	}
}

// cutRecording returns bins [from, to) of rec as a recording of its own.
// TestRunCountsSkippedAndLost: skipped decisions the daemon publishes are
// counted and agree with its status; decisions it never sends are counted
// as lost, so the report cannot say "0 skipped" when windows went without
// a decision.
func TestRunCountsSkippedAndLost(t *testing.T) {
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ids := []int{3, 8, 21}
	rec := testRecording(6_000, ids, 7)
	// Every decision arrives in the first case: the drain ends with the
	// last one, and the decision timeout only bounds a pause of the daemon
	// (one longer than it, on a loaded machine, would end the drain early
	// and count decisions still to come as lost). In the second the drain
	// waits the timeout for the cells whose last decision was dropped.
	for _, tc := range []struct {
		name                 string
		skipEvery, dropEvery int
		timeout              time.Duration
	}{
		{"skipped decisions published", 7, 0, 10 * time.Second},
		{"decisions never sent", 0, 9, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := fmt.Sprintf("dev%d%d", tc.skipEvery, tc.dropEvery)
			d := startFakeDaemon(t, srv.ClientURL(), dev, hashPredictor{}, ids, 0)
			d.skipEvery, d.dropEvery = tc.skipEvery, tc.dropEvery
			pub := newPublisher(t, srv.ClientURL(), dev)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := Run(ctx, pub, Config{Rec: rec, From: 1000, To: 4000, Cells: ids, Speed: 8, DecisionTimeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if res.Epoch != 1 || res.Stale != 0 {
				t.Fatalf("epoch %d, stale %d: want epoch 1, nothing stale", res.Epoch, res.Stale)
			}
			if tc.skipEvery > 0 && (res.Skipped == 0 || res.Skipped != res.DaemonSkipped || res.Lost != 0) {
				t.Fatalf("skipped %d, daemon says %d, lost %d", res.Skipped, res.DaemonSkipped, res.Lost)
			}
			if tc.dropEvery > 0 && (res.Lost == 0 || res.Skipped != 0) {
				t.Fatalf("lost %d, skipped %d: the dropped decisions were not counted", res.Lost, res.Skipped)
			}
		})
	}
}

func cutRecording(rec *rgc.Recording, from, to int) *rgc.Recording {
	out := &rgc.Recording{Name: rec.Name, SampleRateHz: rec.SampleRateHz, Bins: to - from}
	for c := range out.Stimulus {
		out.Stimulus[c] = rec.Stimulus[c][from:to]
	}
	for _, c := range rec.Cells {
		nc := rgc.Cell{ClusterID: c.ClusterID, Quality: c.Quality}
		for _, b := range c.SpikeBins {
			if int(b) >= from && int(b) < to {
				nc.SpikeBins = append(nc.SpikeBins, b-int32(from))
			}
		}
		out.Cells = append(out.Cells, nc)
	}
	return out
}

func TestRunErrors(t *testing.T) {
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	rec := testRecording(3000, []int{1, 2}, 1)
	pub := newPublisher(t, srv.ClientURL(), "nobody")
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no recording", Config{From: 0, To: 2000, Cells: []int{1}}},
		{"stretch too short", Config{Rec: rec, From: 0, To: 1024, Cells: []int{1}}},
		{"stretch past the end", Config{Rec: rec, From: 0, To: 3001, Cells: []int{1}}},
		{"no cells", Config{Rec: rec, From: 0, To: 2000}},
		{"unknown cell", Config{Rec: rec, From: 0, To: 2000, Cells: []int{99}}},
		{"duplicate cell", Config{Rec: rec, From: 0, To: 2000, Cells: []int{1, 1}}},
		{"negative speed", Config{Rec: rec, From: 0, To: 2000, Cells: []int{1}, Speed: -1}},
		{"no daemon", Config{Rec: rec, From: 0, To: 2000, Cells: []int{1}}},
	}
	for _, c := range cases {
		if _, err := Run(ctx, pub, c.cfg); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// A daemon that does not serve the cell.
	startFakeDaemon(t, srv.ClientURL(), "other", hashPredictor{}, []int{2}, 0)
	if _, err := Run(ctx, newPublisher(t, srv.ClientURL(), "other"), Config{Rec: rec, From: 0, To: 2000, Cells: []int{1}}); err == nil {
		t.Error("unserved cell: no error")
	} else {
		t.Logf("unserved cell: %v", err)
	}
	// A daemon that expects the other stimulus mode than the recording's.
	d := startFakeDaemon(t, srv.ClientURL(), "zp", hashPredictor{}, []int{1}, 0)
	d.mode = rgc.StimZeroPhase
	_, err = Run(ctx, newPublisher(t, srv.ClientURL(), "zp"), Config{Rec: rec, From: 0, To: 2000, Cells: []int{1}})
	if err == nil || !strings.Contains(err.Error(), "zero-phase") || !strings.Contains(err.Error(), "input is causal") {
		t.Errorf("daemon of the other stimulus mode: %v, want an error naming both", err)
	}
}
