package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"rgcpred/base/cputime"
	"rgcpred/base/msgauth"
	"rgcpred/base/rt"
	"rgcpred/bench/replay"
	"rgcpred/rgc"
	"rgcpred/serve/embednats"
	"rgcpred/serve/service"
	"rgcpred/stream"
)

// Options configure a benchmark run.
type Options struct {
	// Rec is the recording whose stimulus is played (its test split).
	Rec *rgc.Recording
	// Model is the loaded model the daemon serves; ModelPath names it.
	Model     *service.Model
	ModelPath string
	// Threads is the engine's thread count (for the report).
	Threads int
	// CellCounts are the numbers of cells to measure, ascending.
	CellCounts []int
	// Seconds is the real-time stimulus played per cell count, after the
	// 1024-bin history.
	Seconds float64
	// MaxBatch bounds the windows per model call (0: every due cell).
	MaxBatch int
	// MaxLag is the daemon's overload threshold in bins (0 disables it).
	MaxLag int64
	// Stagger staggers the cells' starts (predictord --stagger).
	Stagger bool
	// Gather is the daemon's gathering of due windows while behind
	// (service.Config.Gather: 0 the model's, negative none).
	Gather int
	// ReloadEvery, if positive, reloads the daemon's model this often while
	// the devices play (predictord's SIGHUP), loading it with Reload.
	ReloadEvery time.Duration
	Reload      service.Loader
	// NoExpect turns off the announcement of each frame's batch to the
	// engine (service.Config.NoExpect, predictord --expect=false).
	NoExpect bool
	// WholeCalls publishes each model call's decisions together when the
	// call ends (service.Config.WholeCalls, predictord --whole-calls).
	WholeCalls bool
	// Auth lists the message authentication settings each cell count is
	// measured with, in order (nil: off only): with it on, the daemon
	// checks the devices' authenticators and signs its decisions, and the
	// devices sign their frames and check the decisions (docs/protocol.md,
	// "Authentication").
	Auth []bool
	// RealTime runs the daemon in real-time mode (service.Config.RealTime,
	// predictord --realtime; nil: off). The mode applies to the whole
	// process, so the devices and the NATS server run in it too.
	RealTime *rt.Settings
	// Trace records every decision's latency in its parts (Point.Trace,
	// Point.Tail): when its frames message reached the daemon, its model
	// call, its publication and its arrival at the device.
	Trace bool
	// Progress, if not nil, receives one line per finished point.
	Progress func(Point)
	// Log receives the daemon's logs (zerolog.Nop() to silence them).
	Log zerolog.Logger
}

// cellPool orders the cells a benchmark draws from: the recording's quality
// cells first, then its other clusters, keeping only cells the model knows.
func cellPool(rec *rgc.Recording, known []int) []int {
	k := make(map[int]bool, len(known))
	for _, c := range known {
		k[c] = true
	}
	var pool []int
	for _, q := range []bool{true, false} {
		for _, c := range rec.Cells {
			if c.Quality == q && k[c.ClusterID] {
				pool = append(pool, c.ClusterID)
			}
		}
	}
	return pool
}

// assign spreads n cells over devices. The daemon serves the same cells on
// every device, so with a pool of p distinct cells the benchmark uses
// d = ceil(n/p) devices of ceil(n/d) cells each (the first of the pool):
// beyond the pool, cells reuse ids on further devices. It returns the
// device names and the cells of each device; d*len(cells) may exceed n by
// less than d.
func assign(n int, pool []int) (devices []string, cells []int, err error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("bench: %d cells: want at least 1", n)
	}
	if len(pool) == 0 {
		return nil, nil, errors.New("bench: the model knows none of the recording's cells")
	}
	d := (n + len(pool) - 1) / len(pool)
	per := (n + d - 1) / d
	for i := range d {
		devices = append(devices, fmt.Sprintf("bench%d", i))
	}
	return devices, append([]int(nil), pool[:per]...), nil
}

// Run measures every cell count of o.CellCounts, each with a fresh daemon
// (package service, the one predictord runs) and one replay device per
// daemon device, over an embedded NATS server on loopback.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Rec == nil || o.Model == nil {
		return nil, errors.New("bench: no recording or model")
	}
	if !(o.Seconds > 0) {
		return nil, fmt.Errorf("bench: %v seconds per point: want more than 0", o.Seconds)
	}
	srv, err := embednats.Start("127.0.0.1", -1)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer srv.Shutdown()
	pool := cellPool(o.Rec, o.Model.Cells)
	rep := &Report{
		Started:        time.Now().UTC(),
		Machine:        fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Model:          o.ModelPath,
		ModelInfo:      o.Model.Name,
		Recording:      o.Rec.Name,
		Split:          "test",
		Threads:        o.Threads,
		MaxBatch:       o.MaxBatch,
		Gather:         service.Gather(o.Gather, o.Model),
		MaxLag:         o.MaxLag,
		Stagger:        o.Stagger,
		NoExpect:       o.NoExpect,
		WholeCalls:     o.WholeCalls,
		GOMAXPROCS:     runtime.GOMAXPROCS(0),
		CriterionP99Ms: float64(RealTimeP99) / float64(time.Millisecond),
		PeakGFLOPs:     peakGFLOPs(300 * time.Millisecond),
		CellPolicy: fmt.Sprintf("cells drawn from the %d cells of the recording the model knows, quality cells first; "+
			"beyond %d cells, further devices reuse the same ids (d devices of ceil(n/d) cells)", len(pool), len(pool)),
	}
	if c, ok := configOf(o.Model); ok {
		rep.FLOPsPerWindow = c.FLOPs()
	}
	auth := o.Auth
	if len(auth) == 0 {
		auth = []bool{false}
	}
	for _, n := range o.CellCounts {
		for _, a := range auth {
			p, err := runPoint(ctx, o, srv.ClientURL(), pool, n, a)
			if err != nil {
				return nil, err
			}
			rep.Points = append(rep.Points, p)
			if o.Progress != nil {
				o.Progress(p)
			}
		}
	}
	rep.finish()
	return rep, nil
}

// runPoint measures one cell count.
func runPoint(ctx context.Context, o Options, url string, pool []int, n int, auth bool) (Point, error) {
	devices, cells, err := assign(n, pool)
	if err != nil {
		return Point{}, err
	}
	var keys msgauth.Keys
	if auth {
		keys = msgauth.Keys{}
		for _, d := range devices {
			k := msgauth.DeviceKeys{Up: make([]byte, msgauth.KeyLen), Down: make([]byte, msgauth.KeyLen)}
			_, _ = rand.Read(k.Up)
			_, _ = rand.Read(k.Down)
			keys[d] = k
		}
	}
	reg := prometheus.NewRegistry()
	if o.ReloadEvery > 0 && o.Reload == nil {
		return Point{}, errors.New("bench: reloads asked for without a loader")
	}
	loaded := false
	var tr *tracer
	var timing func(service.DecisionTiming)
	if o.Trace {
		// Room for every cell's windows at one per horizon, twice over
		// (spikes bring windows forward).
		tr = newTracer(2 * len(devices) * len(cells) * (int(o.Seconds*rgc.BinRateHz)/rgc.Horizon + 2))
		timing = tr.timing
	}
	svc, err := service.New(service.Config{
		Devices:   devices,
		ModelPath: o.ModelPath,
		Load: func(path string, maxBatch int) (*service.Model, error) {
			if loaded { // a reload: a model of its own
				return o.Reload(path, maxBatch)
			}
			loaded = true
			return o.Model, nil
		},
		Cells:          cells,
		MaxBatch:       o.MaxBatch,
		MaxLag:         o.MaxLag,
		Gather:         o.Gather,
		Stagger:        o.Stagger,
		StimMode:       o.Rec.StimMode,
		PublishSilence: true,
		Log:            o.Log,
		Registry:       reg,
		Timing:         timing,
		NoExpect:       o.NoExpect,
		WholeCalls:     o.WholeCalls,
		Keys:           keys,
		RealTime:       o.RealTime,
	})
	if err != nil {
		return Point{}, fmt.Errorf("bench: %d cells: %w", n, err)
	}
	dnc, err := nats.Connect(url, svc.ConnOptions()...)
	if err != nil {
		return Point{}, fmt.Errorf("bench: daemon connection: %w", err)
	}
	defer dnc.Close()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- svc.Run(sctx, dnc) }()
	for deadline := time.Now().Add(10 * time.Second); !svc.Ready(); {
		select {
		case err := <-done:
			return Point{}, fmt.Errorf("bench: daemon stopped: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return Point{}, errors.New("bench: daemon not ready after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}

	from, _ := o.Rec.SplitRange(rgc.Test)
	to := from + rgc.WindowBins + int(o.Seconds*rgc.BinRateHz)
	if to > o.Rec.Bins {
		return Point{}, fmt.Errorf("bench: %v s do not fit in the test split of %s", o.Seconds, o.Rec.Name)
	}
	results := make([]*replay.Result, len(devices))
	errs := make([]error, len(devices))
	conns := make([]*nats.Conn, len(devices))
	for i := range devices {
		if conns[i], err = nats.Connect(url, nats.Name("bench device "+devices[i])); err != nil {
			return Point{}, fmt.Errorf("bench: device connection: %w", err)
		}
		defer conns[i].Close()
	}
	eng0 := engineCounters(reg)
	meter := cputime.Start()
	reloads := make(chan int, 1)
	go func() {
		n := 0
		defer func() { reloads <- n }()
		if o.ReloadEvery <= 0 {
			return
		}
		tick := time.NewTicker(o.ReloadEvery)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				if err := svc.Reload(); err == nil {
					n++
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i, dev := range devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub, err := stream.NewPublisher(conns[i], dev)
			if err == nil && auth {
				err = pub.UseKeys(keys[dev])
			}
			if err != nil {
				errs[i] = err
				return
			}
			cfg := replay.Config{Rec: o.Rec, From: from, To: to, Cells: cells, Speed: 1, DecisionTimeout: 2 * time.Second}
			if tr != nil {
				cfg.OnDecision = tr.onDecision(dev)
			}
			results[i], errs[i] = replay.Run(ctx, pub, cfg)
		}()
	}
	wg.Wait()
	wall, cpu := meter.Elapsed()
	eng := engineCounters(reg).minus(eng0)
	stop()
	nReloads := <-reloads
	if err := <-done; err != nil {
		return Point{}, fmt.Errorf("bench: daemon: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return Point{}, fmt.Errorf("bench: %d cells: %w", n, err)
	}

	p := Point{Cells: len(devices) * len(cells), Devices: len(devices), Seconds: float64(to-from-rgc.WindowBins) / rgc.BinRateHz, Auth: auth}
	var lat, late replay.Durations
	var maxLag time.Duration
	for _, r := range results {
		lat.Merge(&r.Samples)
		late.Merge(&r.LateSamples)
		p.Decisions += r.Decisions
		p.DeviceLateDecisions += r.LateDecisions
		p.LateSpikes += r.Late.Late
		p.Spikes += r.Late.Spikes
		maxLag = max(maxLag, r.Pace.MaxLag)
	}
	p.Latency = lat.Summary()
	p.OverBound = lat.Over(RealTimeP99)
	p.DaemonOverBound = histOver(reg, "predictord_decision_latency_seconds", RealTimeP99.Seconds())
	p.Lateness = late.Summary()
	p.PaceMaxLagMs = float64(maxLag) / float64(time.Millisecond)
	p.Predictions = uint64(counterSum(reg, "predictord_predictions_total"))
	p.DaemonSkipped = int64(counterSum(reg, "predictord_decisions_skipped_total"))
	p.DeadlineMisses = p.DaemonSkipped + p.DeviceLateDecisions
	p.PredictionsPerSec = float64(p.Predictions) / wall.Seconds()
	p.MeanBatch = histMean(reg, "predictord_batch_size")
	p.MeanPredictMs = 1000 * histMean(reg, "predictord_predict_seconds")
	p.CPU = cpu.Seconds() / wall.Seconds()
	if p.Predictions > 0 {
		p.CPUPerPredictionMs = 1000 * cpu.Seconds() / float64(p.Predictions)
	}
	p.LoadAvg = cputime.LoadAvg()
	p.Engine = eng
	p.Reloads = nReloads
	if tr != nil {
		p.Trace, p.TraceUnmatched = tr.rows()
		p.Tail = tailOf(p.Trace, TailShare)
	}
	return p, nil
}

// engineCounters reads the engine's counters from the daemon's metrics.
func engineCounters(reg *prometheus.Registry) EngineCounters {
	mfs, err := reg.Gather()
	if err != nil {
		return EngineCounters{}
	}
	var c EngineCounters
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			switch mf.GetName() {
			case "predictord_engine_windows_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "mode" && l.GetValue() == "split" {
						c.SplitWindows += int64(v)
					}
				}
				c.Windows += int64(v)
			case "predictord_engine_reused_windows_total":
				c.ReusedWindows += int64(v)
			case "predictord_engine_expects_total":
				c.Expects += int64(v)
			case "predictord_engine_parks_total":
				c.Parks += int64(v)
			case "predictord_engine_backoffs_total":
				c.Backoffs += int64(v)
			case "predictord_engine_backoff_calls_total":
				c.BackoffCalls += int64(v)
			}
		}
	}
	return c
}

// series returns every series of the named metric in reg (none when the
// registry cannot be read).
func series(reg *prometheus.Registry, name string) []*dto.Metric {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// histMean returns the mean of every observation of the named histogram in
// reg (0 without observations).
func histMean(reg *prometheus.Registry, name string) float64 {
	var sum float64
	var n uint64
	for _, m := range series(reg, name) {
		sum += m.GetHistogram().GetSampleSum()
		n += m.GetHistogram().GetSampleCount()
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// histOver returns the share of the observations of the named histogram in
// reg above bound, read off the bucket whose upper bound is bound (-1 when
// there is no such bucket or no observation).
func histOver(reg *prometheus.Registry, name string, bound float64) float64 {
	var n, in uint64
	found := false
	for _, m := range series(reg, name) {
		h := m.GetHistogram()
		n += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			if math.Abs(b.GetUpperBound()-bound) <= 1e-9*bound {
				in += b.GetCumulativeCount()
				found = true
			}
		}
	}
	if !found || n == 0 {
		return -1
	}
	return 1 - float64(in)/float64(n)
}

// counterSum adds up every series of the named counter in reg.
func counterSum(reg *prometheus.Registry, name string) float64 {
	var s float64
	for _, m := range series(reg, name) {
		s += m.GetCounter().GetValue()
	}
	return s
}
