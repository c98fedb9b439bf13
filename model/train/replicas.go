package train

import (
	"fmt"
	"sync"
	"sync/atomic"

	"rgcpred/base/spin"
	"rgcpred/base/vec"
	"rgcpred/model"
	"rgcpred/model/graph"
)

// stepGraph is what a training step needs of its graph: one graph, or
// replicas of it sharing the batch.
type stepGraph interface {
	SetInputs(inputs []float32, cellIdx, targets []int) error
	SetTargetDist(p []float32) error
	Run() (float32, error)
	Grad(name string) []float32
	Close() error
}

// Replicas resolves the number of data-parallel replicas of a run with
// threads compute goroutines and batch windows per step: r > 0 as given
// (it must divide both), 0 for auto: one replica per thread when they
// divide the batch, else 1.
func Replicas(r, threads, batch int) (int, error) {
	switch {
	case r < 0:
		return 0, fmt.Errorf("replicas %d, want >= 0 (0: auto)", r)
	case r == 0 && threads > 1 && batch%threads == 0:
		return threads, nil
	case r == 0:
		return 1, nil
	case threads%r != 0 || batch%r != 0:
		return 0, fmt.Errorf("replicas %d must divide the threads (%d) and the batch (%d)", r, threads, batch)
	}
	return r, nil
}

// newStepGraph builds the training graph of w for batch windows: one graph
// on threads goroutines when replicas is 1, else replicas copies each on
// threads/replicas goroutines (replicas must divide both).
func newStepGraph(w *model.Weights, batch, threads, replicas int, opts graph.Options) (stepGraph, error) {
	if replicas <= 1 {
		opts.Threads = threads
		g, err := graph.New(w, batch, opts)
		if err != nil {
			return nil, err
		}
		return g, nil
	}
	return newReplicated(w, batch, threads, replicas, opts)
}

// replicated is data parallelism across the cores: each replica of the
// graph takes a contiguous share of the batch on its own goroutines, and
// the step's loss and gradients are the replicas' means, which is the
// batch mean because every share has the same size. The replicas share the
// weights (read-only during a run; AdamW updates them between runs) but
// each keeps its own batch-norm running statistics, which a run updates
// in place; after a run they are averaged and the average copied back,
// which is the update one graph makes with the batch's mean (for the
// means; the variances' average is the mean of the shares' variances).
//
// What changes against one graph is batch norm's training statistics:
// each replica normalises by its own share's mean and variance ("ghost"
// batch norm, Hoffer et al. 2017, "Train longer, generalize better"), over
// batch/replicas windows of every position. In exchange the replicas run
// without synchronising inside the step: one goroutine per replica keeps
// each core busy with the work it has, where one graph split over the
// cores waits at every layer for its slowest worker.
//
// Replica 0 runs on the caller of Run, replicas 1..n-1 on workers of their
// own, started by the first Run and stopped by Close, so that a step
// starts no goroutine and allocates nothing. A step is published by
// incrementing step; each worker runs its replica and counts itself in
// done. Waiting threads (a worker for the next step, Run for the workers)
// poll for spin.For and then park (spin.Sleepers): a worker's replica
// ends about when replica 0 does, while the gap between steps (the
// optimiser, the next batch) is long enough to park in.
type replicated struct {
	gs     []*graph.Graph
	stats  [][][]float32 // per replica, the batch-norm statistics tensors
	names  []string      // trainable parameters
	grads  map[string][]float32
	per    int // windows per replica
	rows   int // input floats per window
	class  int
	losses []float32
	errs   []error

	step    atomic.Uint64 // generation of the current step; stopStep: return
	done    atomic.Int32  // workers finished with the current step
	idle    spin.Sleepers // workers waiting for a step
	finish  spin.Sleepers // Run waiting for the workers
	started bool          // the workers are running
	closed  bool          // Close was called: Run runs the replicas in turn
	wg      sync.WaitGroup
}

// stopStep is the step word that tells the workers to return.
const stopStep = ^uint64(0)

func newReplicated(w *model.Weights, batch, threads, replicas int, opts graph.Options) (*replicated, error) {
	if batch%replicas != 0 || threads%replicas != 0 {
		return nil, fmt.Errorf("replicas %d must divide the batch (%d) and the threads (%d)", replicas, batch, threads)
	}
	c := w.Config
	r := &replicated{per: batch / replicas, rows: c.InRows * c.InBins, class: c.Classes,
		grads: make(map[string][]float32), losses: make([]float32, replicas), errs: make([]error, replicas)}
	opts.Threads = threads / replicas
	for i := 0; i < replicas; i++ {
		wi := w
		if i > 0 {
			// Shared parameters, own statistics (copies of w's).
			wi = &model.Weights{Config: c, Tensors: make(map[string][]float32, len(w.Tensors))}
			for name, t := range w.Tensors {
				wi.Tensors[name] = t
			}
		}
		var stats [][]float32
		for _, p := range c.Params() {
			if p.Kind != model.KindStat {
				continue
			}
			if i > 0 {
				wi.Tensors[p.Name] = append([]float32(nil), w.Tensors[p.Name]...)
			}
			stats = append(stats, wi.Tensors[p.Name])
		}
		g, err := graph.New(wi, r.per, opts)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		r.gs, r.stats = append(r.gs, g), append(r.stats, stats)
	}
	r.names = r.gs[0].TrainableNames()
	for _, name := range r.names {
		r.grads[name] = make([]float32, len(w.Tensors[name]))
	}
	return r, nil
}

// SetInputs hands each replica its share of the batch.
func (r *replicated) SetInputs(inputs []float32, cellIdx, targets []int) error {
	n := r.per * len(r.gs)
	if len(inputs) != n*r.rows || len(cellIdx) != n || (targets != nil && len(targets) != n) {
		return fmt.Errorf("graph: batch of %d inputs, %d cells, %d targets for batch size %d", len(inputs), len(cellIdx), len(targets), n)
	}
	for i, g := range r.gs {
		lo, hi := i*r.per, (i+1)*r.per
		var tg []int
		if targets != nil {
			tg = targets[lo:hi]
		}
		if err := g.SetInputs(inputs[lo*r.rows:hi*r.rows], cellIdx[lo:hi], tg); err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
	}
	return nil
}

// SetTargetDist hands each replica its share of the target distributions.
func (r *replicated) SetTargetDist(p []float32) error {
	n := r.per * len(r.gs)
	if len(p) != n*r.class {
		return fmt.Errorf("graph: %d target probabilities for %d windows of %d classes", len(p), n, r.class)
	}
	for i, g := range r.gs {
		if err := g.SetTargetDist(p[i*r.per*r.class : (i+1)*r.per*r.class]); err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
	}
	return nil
}

// Run runs the replicas concurrently (the first on the calling goroutine,
// the others on the workers), averages their batch-norm statistics and
// gradients, and returns the batch's mean loss. It must not overlap
// another Run or Close. After Close the replicas run one after another on
// the caller.
func (r *replicated) Run() (float32, error) {
	switch {
	case r.closed:
		for i, g := range r.gs {
			r.losses[i], r.errs[i] = g.Run()
		}
	default:
		if !r.started {
			r.started = true
			for i := 1; i < len(r.gs); i++ {
				r.wg.Add(1)
				go r.work(i)
			}
		}
		r.done.Store(0)
		r.step.Add(1)
		r.idle.Wake()
		r.losses[0], r.errs[0] = r.gs[0].Run()
		await(&r.finish, r.workersDone)
	}
	var loss float32
	for i, err := range r.errs {
		if err != nil {
			return 0, fmt.Errorf("replica %d: %w", i, err)
		}
		loss += r.losses[i]
	}
	scale := 1 / float32(len(r.gs))
	for j, s0 := range r.stats[0] {
		for _, st := range r.stats[1:] {
			vec.Add(s0, s0, st[j])
		}
		vec.Affine(s0, s0, scale, 0)
		for _, st := range r.stats[1:] {
			copy(st[j], s0)
		}
	}
	for _, name := range r.names {
		d := r.grads[name]
		copy(d, r.gs[0].Grad(name))
		for i, g := range r.gs[1:] {
			gi := g.Grad(name)
			if len(gi) != len(d) {
				return 0, fmt.Errorf("replica %d: gradient of %s has %d values, want %d", i+1, name, len(gi), len(d))
			}
			vec.Add(d, d, gi)
		}
		vec.Affine(d, d, scale, 0)
	}
	return loss * scale, nil
}

// Grad returns the batch's mean gradient of the named trainable parameter
// after Run (nil for other names); overwritten by the next Run.
func (r *replicated) Grad(name string) []float32 { return r.grads[name] }

// workersDone reports whether every worker has finished the current step.
func (r *replicated) workersDone() bool { return int(r.done.Load()) == len(r.gs)-1 }

// work is the loop of replica i's worker: wait for a step after the last
// one seen, run the replica, report; return at stopStep.
func (r *replicated) work(i int) {
	defer r.wg.Done()
	var seen uint64
	published := func() bool { return r.step.Load() != seen }
	for {
		await(&r.idle, published)
		s := r.step.Load()
		if s == stopStep {
			return
		}
		seen = s
		r.losses[i], r.errs[i] = r.gs[i].Run()
		if r.done.Add(1) == int32(len(r.gs)-1) {
			r.finish.Wake()
		}
	}
}

// await returns once cond holds: it polls for spin.For, then parks on s
// (whoever makes cond hold wakes s afterwards).
func await(s *spin.Sleepers, cond func() bool) {
	sp := spin.Spinner{Budget: spin.For}
	for !cond() {
		if !sp.More() {
			s.Wait(cond)
			return
		}
	}
}

// Close stops the workers and releases the replicas' graphs. It must not
// overlap a Run; a second Close does nothing more.
func (r *replicated) Close() error {
	r.closed = true
	if r.started {
		r.started = false
		r.step.Store(stopStep)
		r.idle.Wake()
		r.wg.Wait()
	}
	for _, g := range r.gs {
		g.Close()
	}
	return nil
}
