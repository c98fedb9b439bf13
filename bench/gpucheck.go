package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"rgcpred/base/cuda"
	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/model/gpu"
	"rgcpred/rgc"
)

// GPUCheckOptions configure GPUCheck, the device check of the GPU engine
// (docs/engine.md, "The device check").
type GPUCheckOptions struct {
	Data     string        // the recording whose test-split windows are used
	Models   string        // folder of checkpoints named CONFIG.ckpt (others get gpu.TestWeights)
	Configs  []string      // configurations to check for parity (those with a checkpoint run first)
	Windows  int           // windows of the parity check at most (256): fewer where the budget asks
	Timed    []string      // configurations to time (the paper CNN's: PyTorch's reference is that size)
	Batches  []int         // throughput batches (64, 1024, 8192)
	TimeEach time.Duration // time spent on each timed batch
	Device   int           // the GPU's ordinal
	LibDirs  string        // folders searched first for the CUDA libraries
	Progress io.Writer     // a line per part, if not nil
	Deadline time.Time     // stop starting new parts after it (zero: none)
	// Run, if not nil, runs one part in isolation (gpucheck: a child
	// process), so that a sticky CUDA error or a crash spoils that part
	// only; it returns the part's result, or an error saying why there is
	// none (the panic of a crash, a kill at limit). Nil runs parts in this
	// process (RunGPUPart).
	Run func(p GPUPart, limit time.Duration) (*GPUPartResult, error)
	// Done, if not nil, is called with the report so far after each part,
	// so that a crash later leaves what was measured.
	Done func(*GPUReport)
}

// GPUReport is the device check's outcome, written as JSON.
type GPUReport struct {
	Date   string `json:"date"`
	Device string `json:"device"`
	// NoGPU says why no GPU could be opened ("" when one was): the parts
	// below then fail with the same error.
	NoGPU string `json:"no_gpu,omitempty"`
	// Libraries are the CUDA libraries the engine loads, each with its
	// path and version, and the driver's (cuda.Libraries).
	Libraries []cuda.Library `json:"libraries"`
	Parity    []GPUParity    `json:"parity"`
	Timing    []GPUTiming    `json:"timing"`
	// Skipped lists the parts not measured, each with why: not started
	// before the deadline, or killed at its time limit.
	Skipped []string `json:"skipped,omitempty"`
}

// GPUParity is one configuration's layer-by-layer parity (or the error
// that stopped it).
type GPUParity struct {
	Config  string `json:"config"`
	Weights string `json:"weights"` // the checkpoint, or "random (gpu.TestWeights)"
	// WindowsAsked is the most windows the check was given; Windows those
	// its share of the budget allowed (parityWindows).
	WindowsAsked int              `json:"windows_asked"`
	Windows      int              `json:"windows"`
	Report       *gpu.LayerReport `json:"report,omitempty"`
	Error        string           `json:"error,omitempty"`
}

// GPUTiming is the GPU engine's time for one configuration, precision and
// batch. P50Ms and P99Ms are end to end, per Predict: windows staged into
// pinned memory, the graph (copies in and out included) and the
// probabilities on the host. DeviceMs is per pass on the device alone
// (gpu.Engine.DeviceTime: passes back to back, copies from and to pinned
// memory included, no staging, no probabilities).
type GPUTiming struct {
	Config        string  `json:"config"`
	Precision     string  `json:"precision"` // in effect
	Parity        string  `json:"parity,omitempty"`
	Batch         int     `json:"batch"`
	Calls         int     `json:"calls"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	DeviceMs      float64 `json:"device_ms"`
	WindowsPerSec float64 `json:"windows_per_s"`
	Error         string  `json:"error,omitempty"`
}

// GPUPart is one part of the device check, run on its own (a child
// process of gpucheck): a configuration's parity on Windows windows, or
// its timings at Precision.
type GPUPart struct {
	Kind      string // "parity" or "timing"
	Config    string
	Windows   int           // parity
	Precision gpu.Precision // timing
}

// String is the part as ParseGPUPart reads it: "parity CONFIG WINDOWS" or
// "timing CONFIG PRECISION".
func (p GPUPart) String() string {
	if p.Kind == "parity" {
		return fmt.Sprintf("parity %s %d", p.Config, p.Windows)
	}
	return fmt.Sprintf("timing %s %s", p.Config, p.Precision)
}

// ParseGPUPart parses GPUPart.String's form.
func ParseGPUPart(s string) (GPUPart, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return GPUPart{}, fmt.Errorf("part %q: want \"parity CONFIG WINDOWS\" or \"timing CONFIG PRECISION\"", s)
	}
	p := GPUPart{Kind: f[0], Config: f[1]}
	switch f[0] {
	case "parity":
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 1 {
			return GPUPart{}, fmt.Errorf("part %q: windows %q is not a positive count", s, f[2])
		}
		p.Windows = n
	case "timing":
		prec, err := gpu.ParsePrecision(f[2])
		if err != nil {
			return GPUPart{}, fmt.Errorf("part %q: %w", s, err)
		}
		p.Precision = prec
	default:
		return GPUPart{}, fmt.Errorf("part %q: kind %q is neither parity nor timing", s, f[0])
	}
	return p, nil
}

// GPUPartResult is what one part measured.
type GPUPartResult struct {
	Device string      `json:"device,omitempty"`
	Parity *GPUParity  `json:"parity,omitempty"`
	Timing []GPUTiming `json:"timing,omitempty"`
}

// Time limits of the parts: a parity part gets its share of the parity
// budget twice over (the estimate is rough), a timing part its batches'
// time and set-up; neither beyond the deadline plus partGrace.
const (
	partSetup = 20 * time.Second
	partGrace = 15 * time.Second
	// minParityWindows is the fewest windows a parity part is sized to.
	minParityWindows = 8
)

// GPUCheck runs the parity and timing parts of the device check: parity
// first (configurations with a shipped checkpoint before those on random
// weights, each sized to its share of 60% of the budget), then the
// timings, each part isolated where o.Run is set.
func GPUCheck(o GPUCheckOptions) (*GPUReport, error) {
	say := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "gpucheck: "+format+"\n", a...)
		}
	}
	late := func(end time.Time) bool { return !end.IsZero() && time.Now().After(end) }
	limit := func(want time.Duration) time.Duration {
		if o.Deadline.IsZero() {
			return want
		}
		return max(time.Second, min(want, time.Until(o.Deadline)+partGrace))
	}
	run := o.Run
	if run == nil {
		run = func(p GPUPart, _ time.Duration) (*GPUPartResult, error) { return RunGPUPart(o, p) }
	}
	parityEnd := o.Deadline
	if !o.Deadline.IsZero() {
		parityEnd = time.Now().Add(time.Until(o.Deadline) * 6 / 10)
	}
	rep := &GPUReport{Date: time.Now().UTC().Format(time.RFC3339), Libraries: cuda.Libraries(o.LibDirs)}
	if d, err := cuda.Open(o.Device, o.LibDirs); err != nil {
		rep.NoGPU = "no GPU: " + err.Error()
		say("%s", rep.NoGPU)
	} else {
		rep.Device = d.Name
		if err := d.Close(); err != nil {
			return nil, fmt.Errorf("gpucheck: %w", err)
		}
	}
	done := func() {
		if o.Done != nil {
			o.Done(rep)
		}
	}
	configs := shippedFirst(o.Models, o.Configs)
	for i, name := range configs {
		if late(parityEnd) {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("parity %s: not started before its share of the budget ran out", name))
			continue
		}
		part := GPUPart{Kind: "parity", Config: name, Windows: o.Windows}
		share := time.Duration(0)
		if !parityEnd.IsZero() {
			share = time.Until(parityEnd) / time.Duration(len(configs)-i)
		}
		if share > 0 {
			cost, err := parityCost(o, name)
			if err != nil {
				say("%s: cost not estimated (%v): %d windows", name, err, o.Windows)
			} else {
				part.Windows = parityWindows(o.Windows, cost, share)
				say("%s: %v a window on the CPU, %v share: %d windows", name, cost.Round(time.Millisecond), share.Round(time.Second), part.Windows)
			}
		}
		res, err := run(part, limit(max(2*share, partSetup)))
		p := GPUParity{Config: name, WindowsAsked: o.Windows, Windows: part.Windows}
		switch {
		case errors.Is(err, ErrPartKilled):
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("parity %s: %v", name, err))
			say("%s: %v", name, err)
			done()
			continue
		case err != nil:
			p.Error = err.Error()
		case res.Parity != nil:
			p = *res.Parity
			p.WindowsAsked, p.Windows = o.Windows, part.Windows
		}
		if p.Error != "" {
			say("%s: %s", name, p.Error)
		} else if r := p.Report; r != nil {
			say("%s: ok %v on %d windows, first over %g: %q (%.3g), head vs CPU %.3g, %s", name, r.OK, r.Windows, gpu.ParityTol, r.FirstOver, r.FirstOverDiff, r.HeadVsEngine, r.ProbsVsEngine)
		}
		if res != nil && res.Device != "" {
			rep.Device = res.Device
		}
		rep.Parity = append(rep.Parity, p)
		done()
	}
	for _, name := range o.Timed {
		for _, prec := range []gpu.Precision{gpu.FP32, gpu.TF32} {
			if late(o.Deadline) {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("timing %s %s: not started before the deadline", name, prec))
				continue
			}
			part := GPUPart{Kind: "timing", Config: name, Precision: prec}
			res, err := run(part, limit(partSetup+time.Duration(2*(len(o.Batches)+1))*max(o.TimeEach, time.Second)))
			switch {
			case errors.Is(err, ErrPartKilled):
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("timing %s %s: %v", name, prec, err))
				say("%s %s: %v", name, prec, err)
				done()
				continue
			case err != nil:
				res = &GPUPartResult{Timing: []GPUTiming{{Config: name, Precision: string(prec), Error: err.Error()}}}
			}
			for _, t := range res.Timing {
				if t.Error != "" {
					say("%s %s: %s", name, prec, t.Error)
					continue
				}
				say("%s %s, batch %d: p50 %.3f ms, p99 %.3f ms end to end, %.3f ms on the device, %.0f windows/s", t.Config, t.Precision, t.Batch, t.P50Ms, t.P99Ms, t.DeviceMs, t.WindowsPerSec)
			}
			if res.Device != "" {
				rep.Device = res.Device
			}
			rep.Timing = append(rep.Timing, res.Timing...)
			done()
		}
	}
	return rep, nil
}

// ErrPartKilled marks a part stopped at its time limit: not measured,
// which is not a failure.
var ErrPartKilled = errors.New("killed at its time limit")

// shippedFirst returns configs with those that have a checkpoint in
// models first, each group in its given order.
func shippedFirst(models string, configs []string) []string {
	var shipped, random []string
	for _, c := range configs {
		if _, err := os.Stat(filepath.Join(models, c+".ckpt")); err == nil {
			shipped = append(shipped, c)
		} else {
			random = append(random, c)
		}
	}
	return append(shipped, random...)
}

// parityWindows sizes a parity part: as many windows as its share of the
// budget allows at cost a window (the CPU reference dominates; half the
// share is kept for the engine's set-up, the CPU engine and the device),
// between minParityWindows and asked.
func parityWindows(asked int, cost, share time.Duration) int {
	if cost <= 0 {
		return asked
	}
	return max(min(asked, int(share/2/cost)), min(asked, minParityWindows))
}

// parityCost is the CPU reference's cost a window for configuration name
// (gpu.EmulationCost on 2 windows).
func parityCost(o GPUCheckOptions, name string) (time.Duration, error) {
	ck, _, err := checkpointFor(o, name, func(m rgc.StimMode) (*rgc.Recording, error) { return rgc.LoadMode(o.Data, m) })
	if err != nil {
		return 0, err
	}
	return gpu.EmulationCost(ck.Weights, ck.CellIDs, 2)
}

// RunGPUPart runs one part of the device check in this process.
func RunGPUPart(o GPUCheckOptions, p GPUPart) (*GPUPartResult, error) {
	recs := map[rgc.StimMode]*rgc.Recording{}
	recording := func(m rgc.StimMode) (*rgc.Recording, error) {
		if r, ok := recs[m]; ok {
			return r, nil
		}
		r, err := rgc.LoadMode(o.Data, m)
		recs[m] = r
		return r, err
	}
	res := &GPUPartResult{}
	switch p.Kind {
	case "parity":
		par := GPUParity{Config: p.Config, WindowsAsked: p.Windows, Windows: p.Windows}
		o.Windows = p.Windows
		r, dev, err := checkParity(o, p.Config, recording, &par)
		if err != nil {
			par.Error = err.Error()
		}
		par.Report, res.Device, res.Parity = r, dev, &par
	case "timing":
		ts, dev, err := timeGPU(o, p.Config, p.Precision, recording)
		if err != nil {
			ts = append(ts, GPUTiming{Config: p.Config, Precision: string(p.Precision), Error: err.Error()})
		}
		res.Timing, res.Device = ts, dev
	default:
		return nil, fmt.Errorf("gpucheck: unknown part %q", p.Kind)
	}
	return res, nil
}

// checkpointFor returns configuration name's checkpoint in o.Models
// (loaded and validated), or random weights for the recording's quality
// cells in a checkpoint that holds only weights, cells and stimulus mode.
func checkpointFor(o GPUCheckOptions, name string, recording func(rgc.StimMode) (*rgc.Recording, error)) (*model.Checkpoint, string, error) {
	path := filepath.Join(o.Models, name+".ckpt")
	if _, err := os.Stat(path); err == nil {
		ck, err := model.LoadCheckpoint(path)
		return ck, path, err
	}
	rec, err := recording(rgc.StimCausal)
	if err != nil {
		return nil, "", err
	}
	ids := rec.QualityClusterIDs()
	w, err := gpu.TestWeights(name, len(ids), 1)
	if err != nil {
		return nil, "", err
	}
	return &model.Checkpoint{Weights: w, CellIDs: ids, StimMode: rgc.StimCausal}, "random (gpu.TestWeights)", nil
}

// realWindows returns n windows of the test split of the checkpoint's
// recording (its stimulus mode), drawn from its cells with seed 1.
func realWindows(ck *model.Checkpoint, n int, recording func(rgc.StimMode) (*rgc.Recording, error)) (*rgc.Batch, error) {
	rec, err := recording(ck.StimMode)
	if err != nil {
		return nil, err
	}
	cells, err := rec.CellIndices(ck.CellIDs)
	if err != nil {
		return nil, err
	}
	s := rgc.NewSampler(rec, rgc.Test, cells, 1)
	refs := make([]rgc.WindowRef, n)
	for i := range refs {
		refs[i] = s.Next()
	}
	b := &rgc.Batch{}
	rec.FillBatch(refs, b, nil)
	return b, nil
}

func checkParity(o GPUCheckOptions, name string, recording func(rgc.StimMode) (*rgc.Recording, error), p *GPUParity) (*gpu.LayerReport, string, error) {
	ck, src, err := checkpointFor(o, name, recording)
	if err != nil {
		return nil, "", err
	}
	p.Weights = src
	b, err := realWindows(ck, o.Windows, recording)
	if err != nil {
		return nil, "", err
	}
	cpu, err := engine.NewFromWeights(ck.Weights, ck.CellIDs, o.Windows, runtime.NumCPU())
	if err != nil {
		return nil, "", err
	}
	defer cpu.Close()
	g, err := gpu.NewFromWeights(ck.Weights, ck.CellIDs, gpu.Options{MaxBatch: o.Windows, Device: o.Device, LibDirs: o.LibDirs, NoGraphs: true})
	if err != nil {
		return nil, "", err
	}
	defer g.Close()
	r, err := g.LayerParity(b, cpu)
	return r, g.Device(), err
}

// deviceCalls is the number of back-to-back passes of a device timing.
const deviceCalls = 20

func timeGPU(o GPUCheckOptions, name string, prec gpu.Precision, recording func(rgc.StimMode) (*rgc.Recording, error)) ([]GPUTiming, string, error) {
	ck, _, err := checkpointFor(o, name, recording)
	if err != nil {
		return nil, "", err
	}
	maxB := slices.Max(o.Batches)
	g, err := gpu.NewFromWeights(ck.Weights, ck.CellIDs, gpu.Options{MaxBatch: maxB, Device: o.Device, LibDirs: o.LibDirs, Precision: prec})
	if err != nil {
		return nil, "", err
	}
	defer g.Close()
	got, par := g.Precision()
	all, err := realWindows(ck, maxB, recording)
	if err != nil {
		return nil, "", err
	}
	out := make([]float32, maxB*rgc.NumClasses)
	var ts []GPUTiming
	for _, nb := range append([]int{1}, o.Batches...) {
		b := &rgc.Batch{Inputs: all.Inputs[:nb*rgc.WindowLen], Cells: all.Cells[:nb], Ends: all.Ends[:nb]}
		t := GPUTiming{Config: name, Precision: string(got), Batch: nb}
		if par.Windows > 0 {
			t.Parity = par.String()
		}
		var calls []time.Duration
		start := time.Now()
		for len(calls) < 3 || time.Since(start) < o.TimeEach {
			t0 := time.Now()
			if err := g.Predict(b, out); err != nil {
				return ts, g.Device(), errors.Join(fmt.Errorf("batch %d", nb), err)
			}
			calls = append(calls, time.Since(t0))
		}
		total := time.Since(start)
		dev, err := g.DeviceTime(min(nb, g.MaxBatch()), deviceCalls)
		if err != nil {
			return ts, g.Device(), err
		}
		slices.Sort(calls)
		t.Calls = len(calls)
		t.P50Ms = ms(calls[len(calls)/2])
		t.P99Ms = ms(calls[min(len(calls)-1, len(calls)*99/100)])
		t.DeviceMs = ms(dev)
		t.WindowsPerSec = float64(nb*len(calls)) / total.Seconds()
		ts = append(ts, t)
	}
	return ts, g.Device(), nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
