package graph

import (
	"fmt"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"

	"rgcpred/model"
)

// TestExecutorRunsOnlyLiveOps checks that every op the executor runs feeds
// the loss, the output or a parameter's gradient (gorgonia also builds the
// gradient of the input batch, the first convolution's data gradient,
// which nothing reads), and that dropping the rest changes nothing: the
// loss, the output, every gradient and the batch-norm running statistics
// a training run updates are bit for bit those of an executor that runs
// every node.
func TestExecutorRunsOnlyLiveOps(t *testing.T) {
	for _, tc := range []struct {
		stem, head, cnn string
		opts            Options
	}{
		{model.StemGPTA, model.HeadCat, model.CNNCPU, Options{Training: true}},
		{model.StemGPTB, model.HeadLogMix, model.CNNCPU, Options{Training: true}},
		{model.StemGPTA, model.HeadCat, model.CNNPaper, Options{Training: true}},
		{model.StemGPTA, model.HeadCat, model.CNNCPU, Options{Training: true, GorgoniaConv: true}},
		{model.StemGPTA, model.HeadCat, model.CNNCPU, Options{}},
	} {
		name := fmt.Sprintf("%s-%s-%s/training=%v/gconv=%v", tc.stem, tc.head, tc.cnn, tc.opts.Training, tc.opts.GorgoniaConv)
		t.Run(name, func(t *testing.T) {
			c, err := model.NewConfig(tc.stem, tc.head, tc.cnn, 3)
			if err != nil {
				t.Fatal(err)
			}
			w := randomWeights(t, c, 1)
			tc.opts.Threads = 1
			g, err := New(w, 2, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			read := map[int]bool{g.ex.index[g.loss]: true, g.ex.index[g.out]: true}
			for _, n := range g.grads {
				read[g.ex.index[n]] = true
			}
			for _, s := range g.ex.steps {
				for _, j := range s.in {
					read[j] = true
				}
			}
			for _, s := range g.ex.steps {
				if !read[s.out] {
					t.Errorf("op %v runs but nothing reads it", s.n)
				}
			}

			all, err := G.Sort(g.g)
			if err != nil {
				t.Fatal(err)
			}
			full, err := newExecutor(g.g, g.ex.par, all)
			if err != nil {
				t.Fatal(err)
			}
			if len(full.steps) <= len(g.ex.steps) && tc.opts.Training {
				t.Errorf("the full executor runs %d ops, the pruned one %d: nothing was pruned", len(full.steps), len(g.ex.steps))
			}
			x, cells, tg := randomBatch(c, 2, 1)
			if err := g.SetInputs(x, cells, tg); err != nil {
				t.Fatal(err)
			}
			var stats []string
			for _, p := range c.Params() {
				if p.Kind == model.KindStat {
					stats = append(stats, p.Name)
				}
			}
			start := w.Clone()
			pruned := runCollect(t, g, g.ex, w, stats)
			for name, v := range start.Tensors {
				copy(w.Tensors[name], v) // in place: the graph holds these slices
			}
			whole := runCollect(t, g, full, w, stats)
			if len(pruned) != len(whole) {
				t.Fatalf("%d values against %d", len(pruned), len(whole))
			}
			for k, v := range pruned {
				if !slices.Equal(v, whole[k]) {
					t.Errorf("%s differs between the pruned and the full executor", k)
				}
			}
			if tc.opts.Training && len(pruned) < 2+len(g.TrainableNames()) {
				t.Errorf("%d values collected, want the loss, the output and %d gradients", len(pruned), len(g.TrainableNames()))
			}
		})
	}
}

// runCollect runs ex once on g's inputs and returns copies of the loss, the
// output, every gradient and the named running statistics.
func runCollect(t *testing.T, g *Graph, ex *executor, w *model.Weights, stats []string) map[string][]float32 {
	t.Helper()
	if err := ex.run(); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float32{
		"loss":   slices.Clone(floats(ex.value(g.loss))),
		"output": slices.Clone(floats(ex.value(g.out))),
	}
	for name, n := range g.grads {
		got["grad "+name] = slices.Clone(floats(ex.value(n)))
	}
	for _, name := range stats {
		got["stat "+name] = slices.Clone(w.Tensors[name])
	}
	return got
}
