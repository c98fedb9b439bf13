package train

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"time"

	"rgcpred/model"
	"rgcpred/model/graph"
)

// StepBench times training steps as `trainer train` takes them (graph
// forward and backward, then the AdamW update) on a freshly initialised
// model and a fixed batch of random windows (binary stimulus, sparse
// spikes): the step's cost does not depend on the data.
type StepBench struct {
	g   *graph.Graph
	w   *model.Weights
	opt *AdamW
}

// NewStepBench builds the model of configuration c for batch windows on
// threads compute goroutines, its GEMMs in arithmetic p (auto resolved as
// for a run), and runs one warm-up step.
func NewStepBench(c model.Config, batch, threads int, seed uint64, p Precision) (*StepBench, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if _, err := ParsePrecision(string(p)); err != nil && p != "" {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	w := model.InitWeights(c, rng)
	g, err := graph.New(w, batch, graph.Options{Training: true, Threads: threads, BF16: p.Resolve() == PrecisionBF16})
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
	b := &StepBench{g: g, w: w, opt: NewAdamW()}
	if err := b.Steps(1); err != nil {
		return nil, err
	}
	return b, nil
}

// Steps takes n training steps (a small learning rate, so that the
// weights stay in range however many steps are timed).
func (b *StepBench) Steps(n int) error {
	for i := 0; i < n; i++ {
		if _, err := b.g.Run(); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		b.opt.Update(b.w, b.g.Grad, 1e-5)
	}
	return nil
}

// Rate takes n steps and returns the samples per second of wall time.
func (b *StepBench) Rate(n int) (float64, error) {
	t0 := time.Now()
	if err := b.Steps(n); err != nil {
		return 0, err
	}
	return float64(n*b.g.Batch()) / time.Since(t0).Seconds(), nil
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
