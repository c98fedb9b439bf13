package graph

import (
	"testing"

	"rgcpred/model"
)

// TestExecutorRunsOnlyLiveOps checks that every op the executor runs feeds
// the loss, the output or a parameter's gradient: gorgonia also builds the
// gradient of the input batch (the first convolution's data gradient),
// which nothing reads.
func TestExecutorRunsOnlyLiveOps(t *testing.T) {
	for _, tc := range []struct{ stem, head, cnn string }{
		{model.StemGPTA, model.HeadCat, model.CNNCPU},
		{model.StemGPTB, model.HeadLogMix, model.CNNCPU},
		{model.StemGPTA, model.HeadCat, model.CNNPaper},
	} {
		t.Run(tc.stem+"-"+tc.head+"-"+tc.cnn, func(t *testing.T) {
			c, err := model.NewConfig(tc.stem, tc.head, tc.cnn, 3)
			if err != nil {
				t.Fatal(err)
			}
			g, err := New(randomWeights(t, c, 1), 2, Options{Training: true, Threads: 1})
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
			x, cells, tg := randomBatch(c, 2, 1)
			if err := g.SetInputs(x, cells, tg); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Run(); err != nil {
				t.Fatal(err)
			}
			for _, name := range g.TrainableNames() {
				if g.Grad(name) == nil {
					t.Errorf("no gradient for %s", name)
				}
			}
		})
	}
}
