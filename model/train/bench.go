package train

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"

	"rgcpred/base/cputime"
	"rgcpred/model"
	"rgcpred/model/graph"
)

// StepBench times training steps as `trainer train` takes them (graph
// forward and backward, then the AdamW update) on a freshly initialised
// model and a fixed batch of random windows (binary stimulus, sparse
// spikes): the step's cost does not depend on the data.
type StepBench struct {
	g     stepGraph
	w     *model.Weights
	opt   *AdamW
	ema   *EMA // nil unless AverageWeights
	batch int
	// Replicas is the number of data-parallel replicas, resolved.
	Replicas int
}

// NewStepBench builds the model of configuration c for batch windows on
// threads compute goroutines shared by replicas data-parallel replicas (0:
// auto, as Options.Replicas), its GEMMs in arithmetic p (auto resolved as
// for a run), and runs one warm-up step.
func NewStepBench(c model.Config, batch, threads, replicas int, seed uint64, p Precision) (*StepBench, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if _, err := ParsePrecision(string(p)); err != nil && p != "" {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	w := model.InitWeights(c, rng)
	replicas, err := Replicas(replicas, threads, batch)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	g, err := newStepGraph(w, batch, threads, replicas, graph.Options{Training: true, BF16: p.Resolve() == PrecisionBF16})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	x := make([]float32, batch*c.InRows*c.InBins)
	for i := range x {
		spikes := (i/c.InBins)%c.InRows == c.InRows-1
		if (spikes && rng.Float64() < 0.02) || (!spikes && rng.Float64() < 0.5) {
			x[i] = 1
		}
	}
	cells, targets := make([]int, batch), make([]int, batch)
	for i := range cells {
		cells[i] = rng.IntN(c.NumCells)
		targets[i] = rng.IntN(c.Classes)
	}
	if err := g.SetInputs(x, cells, targets); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	b := &StepBench{g: g, w: w, opt: NewAdamW(), batch: batch, Replicas: replicas}
	if err := b.Steps(1); err != nil {
		return nil, err
	}
	return b, nil
}

// Close releases the graph's helper goroutines.
func (b *StepBench) Close() { b.g.Close() }

// Steps takes n training steps (a small learning rate, so that the
// weights stay in range however many steps are timed).
func (b *StepBench) Steps(n int) error {
	for i := 0; i < n; i++ {
		if _, err := b.g.Run(); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		b.opt.Update(b.w, b.g.Grad, 1e-5)
		if b.ema != nil {
			b.ema.Update(b.w)
		}
	}
	return nil
}

// AverageWeights makes the steps that follow also update an exponential
// moving average of the weights of the given decay, as a run with
// Options.EMA does.
func (b *StepBench) AverageWeights(decay float64) { b.ema = NewEMA(b.w, decay) }

// Rate is the speed of timed steps: samples per second of wall time and
// per second of the process's CPU time, and the cores the process kept
// busy (CPU time over wall time). On shared cores the wall rate moves with
// other work; the CPU rate says what one core of ours does, and Cores
// whether the step kept every thread it was given busy.
type Rate struct {
	PerSec, PerCPUSec, Cores float64
}

// Rate takes n steps and measures them (PerCPUSec and Cores 0 where the
// CPU time is not measured: cputime.Process).
func (b *StepBench) Rate(n int) (Rate, error) {
	m := cputime.Start()
	if err := b.Steps(n); err != nil {
		return Rate{}, err
	}
	wall, cpu := m.Elapsed()
	samples := float64(n * b.batch)
	r := Rate{PerSec: samples / wall.Seconds()}
	if cpu > 0 {
		r.PerCPUSec, r.Cores = samples/cpu.Seconds(), cpu.Seconds()/wall.Seconds()
	}
	return r, nil
}

// TorchTrainRate runs the PyTorch reference training step
// (shared/tools/torchref.py --mode train: the paper's CNN with the given
// transformer stem, categorical head, AdamW) with python on threads
// threads for iters timed steps, and returns its samples per second.
func TorchTrainRate(ctx context.Context, python, script, stem string, batch, threads, iters int) (float64, error) {
	cmd := exec.CommandContext(ctx, python, script, "--mode", "train", "--stem", stem,
		"--batch", strconv.Itoa(batch), "--threads", strconv.Itoa(threads), "--iters", strconv.Itoa(iters))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("pytorch reference %s: %w: %s", script, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var r struct {
		SamplesPerS float64 `json:"samples_per_s"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return 0, fmt.Errorf("pytorch reference %s: output %q: %w", script, out, err)
	}
	if !(r.SamplesPerS > 0) {
		return 0, fmt.Errorf("pytorch reference %s: no samples_per_s in %q", script, out)
	}
	return r.SamplesPerS, nil
}
