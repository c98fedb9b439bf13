package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
	Configs  []string      // configurations to check for parity
	Windows  int           // windows of the parity check (256)
	Timed    []string      // configurations to time (the paper CNN's: PyTorch's reference is that size)
	Batches  []int         // throughput batches (64, 1024, 8192)
	TimeEach time.Duration // time spent on each timed batch
	Device   int           // the GPU's ordinal
	LibDirs  string        // folders searched first for the CUDA libraries
	Progress io.Writer     // a line per part, if not nil
	Deadline time.Time     // stop starting new parts after it (zero: none)
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
	NoGPU   string      `json:"no_gpu,omitempty"`
	Parity  []GPUParity `json:"parity"`
	Timing  []GPUTiming `json:"timing"`
	Skipped []string    `json:"skipped,omitempty"` // parts not run before the deadline
}

// GPUParity is one configuration's layer-by-layer parity (or the error
// that stopped it).
type GPUParity struct {
	Config  string           `json:"config"`
	Weights string           `json:"weights"` // the checkpoint, or "random (gpu.TestWeights)"
	Report  *gpu.LayerReport `json:"report,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// GPUTiming is the GPU engine's time for one configuration, precision and
// batch: per call (Predict, inputs copied in and probabilities out
// included), and windows per second.
type GPUTiming struct {
	Config        string  `json:"config"`
	Precision     string  `json:"precision"` // in effect
	Parity        string  `json:"parity,omitempty"`
	Batch         int     `json:"batch"`
	Calls         int     `json:"calls"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	WindowsPerSec float64 `json:"windows_per_s"`
	Error         string  `json:"error,omitempty"`
}

// GPUCheck runs the parity and timing parts of the device check.
func GPUCheck(o GPUCheckOptions) (*GPUReport, error) {
	say := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "gpucheck: "+format+"\n", a...)
		}
	}
	late := func() bool { return !o.Deadline.IsZero() && time.Now().After(o.Deadline) }
	// The parity part starts no configuration after 60% of the budget, so
	// that the timings get the rest.
	parityEnd := o.Deadline
	if !o.Deadline.IsZero() {
		parityEnd = time.Now().Add(time.Until(o.Deadline) * 6 / 10)
	}
	rep := &GPUReport{Date: time.Now().UTC().Format(time.RFC3339)}
	if d, err := cuda.Open(o.Device, o.LibDirs); err != nil {
		rep.NoGPU = "no GPU: " + err.Error()
		say("%s", rep.NoGPU)
	} else if err := d.Close(); err != nil {
		return nil, fmt.Errorf("gpucheck: %w", err)
	}
	recs := map[rgc.StimMode]*rgc.Recording{}
	recording := func(m rgc.StimMode) (*rgc.Recording, error) {
		if r, ok := recs[m]; ok {
			return r, nil
		}
		r, err := rgc.LoadMode(o.Data, m)
		recs[m] = r
		return r, err
	}
	for _, name := range o.Configs {
		if !parityEnd.IsZero() && time.Now().After(parityEnd) {
			rep.Skipped = append(rep.Skipped, "parity "+name)
			continue
		}
		p := GPUParity{Config: name}
		r, dev, err := checkParity(o, name, recording, &p)
		if err != nil {
			p.Error = err.Error()
			say("%s: %v", name, err)
		} else {
			p.Report = r
			rep.Device = dev
			say("%s: ok %v, first over %g: %q (%.3g), head vs CPU %.3g, %s", name, r.OK, gpu.ParityTol, r.FirstOver, r.FirstOverDiff, r.HeadVsEngine, r.ProbsVsEngine)
		}
		rep.Parity = append(rep.Parity, p)
		if o.Done != nil {
			o.Done(rep)
		}
	}
	for _, name := range o.Timed {
		for _, prec := range []gpu.Precision{gpu.FP32, gpu.TF32} {
			if late() {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("timing %s %s", name, prec))
				continue
			}
			ts, dev, err := timeGPU(o, name, prec, recording)
			if err != nil {
				ts = append(ts, GPUTiming{Config: name, Precision: string(prec), Error: err.Error()})
				say("%s %s: %v", name, prec, err)
			} else {
				rep.Device = dev
			}
			for _, t := range ts {
				if t.Error != "" {
					continue
				}
				say("%s %s, batch %d: p50 %.3f ms, p99 %.3f ms, %.0f windows/s", t.Config, t.Precision, t.Batch, t.P50Ms, t.P99Ms, t.WindowsPerSec)
			}
			rep.Timing = append(rep.Timing, ts...)
			if o.Done != nil {
				o.Done(rep)
			}
		}
	}
	return rep, nil
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
		slices.Sort(calls)
		t.Calls = len(calls)
		t.P50Ms = ms(calls[len(calls)/2])
		t.P99Ms = ms(calls[min(len(calls)-1, len(calls)*99/100)])
		t.WindowsPerSec = float64(nb*len(calls)) / total.Seconds()
		ts = append(ts, t)
	}
	return ts, g.Device(), nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
