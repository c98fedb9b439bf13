package train

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"rgcpred/base/spin/spintest"
	"rgcpred/model"
	"rgcpred/model/graph"
)

func TestReplicasResolve(t *testing.T) {
	for _, tc := range []struct {
		r, threads, batch int
		want              int
		err               string
	}{
		{0, 2, 64, 2, ""}, // auto: one per thread
		{0, 1, 64, 1, ""}, // one thread, one graph
		{0, 2, 63, 1, ""}, // the threads do not divide the batch
		{1, 2, 64, 1, ""}, // one graph over both threads
		{2, 4, 64, 2, ""}, // two threads each
		{3, 2, 64, 0, "divide"},
		{2, 2, 63, 0, "divide"},
		{-1, 2, 64, 0, ">= 0"},
	} {
		got, err := Replicas(tc.r, tc.threads, tc.batch)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Replicas(%d, %d, %d): error %v, want one mentioning %q", tc.r, tc.threads, tc.batch, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Replicas(%d, %d, %d) = %d, %v; want %d", tc.r, tc.threads, tc.batch, got, err, tc.want)
		}
	}
}

// TestReplicatedIsMeanOfShares checks the data-parallel step against its
// definition: its loss, every gradient and the batch-norm running
// statistics after a run are the means of separate graphs, each run on
// its share of the batch from the same weights. The weights the replicas
// share are not written by a run.
func TestReplicatedIsMeanOfShares(t *testing.T) {
	c := tinyConfig(model.HeadCat, 3)
	const batch, replicas = 6, 3
	rng := rand.New(rand.NewPCG(7, 1))
	w := model.InitWeights(c, rng)
	// Non-trivial running statistics, so that averaging is visible.
	for _, p := range c.Params() {
		if p.Kind == model.KindStat {
			for i := range w.Tensors[p.Name] {
				w.Tensors[p.Name][i] = 0.5 + rng.Float32()
			}
		}
	}
	x := make([]float32, batch*c.InRows*c.InBins)
	for i := range x {
		if rng.Float64() < 0.3 {
			x[i] = 1
		}
	}
	cells, targets := make([]int, batch), make([]int, batch)
	for i := range cells {
		cells[i], targets[i] = rng.IntN(c.NumCells), rng.IntN(c.Classes)
	}
	soft := make([]float32, batch*c.Classes)
	for i := 0; i < batch; i++ {
		soft[i*c.Classes+targets[i]] = 0.7
		soft[i*c.Classes+(targets[i]+1)%c.Classes] = 0.3
	}
	opts := graph.Options{Training: true, SoftTargets: true}

	// The shares, each on its own copy of the weights.
	per := batch / replicas
	var wantLoss float64
	want := map[string][]float64{}
	for r := 0; r < replicas; r++ {
		wr := w.Clone()
		g, err := graph.New(wr, per, graph.Options{Training: true, SoftTargets: true, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := r*per, (r+1)*per
		if err := g.SetInputs(x[lo*c.InRows*c.InBins:hi*c.InRows*c.InBins], cells[lo:hi], targets[lo:hi]); err != nil {
			t.Fatal(err)
		}
		if err := g.SetTargetDist(soft[lo*c.Classes : hi*c.Classes]); err != nil {
			t.Fatal(err)
		}
		loss, err := g.Run()
		if err != nil {
			t.Fatal(err)
		}
		wantLoss += float64(loss) / replicas
		for _, p := range c.Params() {
			v := wr.Tensors[p.Name]
			if p.Kind != model.KindStat {
				v = g.Grad(p.Name)
			}
			if want[p.Name] == nil {
				want[p.Name] = make([]float64, len(v))
			}
			for i, e := range v {
				want[p.Name][i] += float64(e) / replicas
			}
		}
		g.Close()
	}

	wd := w.Clone()
	before := w.Clone()
	g, err := newStepGraph(wd, batch, replicas, replicas, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := g.(*replicated); !ok {
		t.Fatalf("newStepGraph with %d replicas built %T", replicas, g)
	}
	if err := g.SetInputs(x, cells, targets); err != nil {
		t.Fatal(err)
	}
	if err := g.SetTargetDist(soft); err != nil {
		t.Fatal(err)
	}
	loss, err := g.Run()
	if err != nil {
		t.Fatal(err)
	}
	// Float32 sums in a different order: relative 1e-5 of the values' scale.
	close := func(got float32, want float64, scale float64) bool {
		return math.Abs(float64(got)-want) <= 1e-5*scale+1e-7
	}
	if !close(loss, wantLoss, math.Abs(wantLoss)) {
		t.Errorf("loss %v, want the shares' mean %v", loss, wantLoss)
	}
	for _, p := range c.Params() {
		got := wd.Tensors[p.Name]
		if p.Kind != model.KindStat {
			got = g.Grad(p.Name)
			for i, v := range wd.Tensors[p.Name] {
				if v != before.Tensors[p.Name][i] {
					t.Fatalf("%s[%d] written by the run: %v, was %v", p.Name, i, v, before.Tensors[p.Name][i])
				}
			}
		}
		var scale float64
		for _, v := range want[p.Name] {
			scale = math.Max(scale, math.Abs(v))
		}
		if len(got) != len(want[p.Name]) {
			t.Fatalf("%s: %d values, want %d", p.Name, len(got), len(want[p.Name]))
		}
		for i, v := range got {
			if !close(v, want[p.Name][i], scale) {
				t.Fatalf("%s[%d] = %v, want the shares' mean %v (scale %v)", p.Name, i, v, want[p.Name][i], scale)
			}
		}
	}
	if err := g.SetInputs(x[:len(x)-1], cells, targets); err == nil {
		t.Error("a short batch was accepted")
	}
	if err := g.SetTargetDist(soft[1:]); err == nil {
		t.Error("short target distributions were accepted")
	}
}

// TestReplicatedWorkersStopAtClose checks the replicas' workers: started
// by the first Run (one per replica after the first; a one-thread graph
// has no helpers of its own), gone once Close returns, and a Run after
// Close still computes the step, on the caller alone: the same loss, bit
// for bit (training batch norm uses the batch's statistics, and each
// replica's arithmetic does not depend on the goroutine it runs on).
func TestReplicatedWorkersStopAtClose(t *testing.T) {
	c := tinyConfig(model.HeadCat, 3)
	const batch, replicas = 6, 3
	w := model.InitWeights(c, rand.New(rand.NewPCG(9, 1)))
	x := make([]float32, batch*c.InRows*c.InBins)
	for i := range x {
		x[i] = float32(i % 2)
	}
	cells, targets := []int{0, 1, 2, 0, 1, 2}, []int{1, 5, 0, 80, 3, 3}
	g, err := newStepGraph(w, batch, replicas, replicas, graph.Options{Training: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetInputs(x, cells, targets); err != nil {
		t.Fatal(err)
	}
	l0, err := g.Run()
	if err != nil {
		t.Fatal(err)
	}
	if n := workers(); n != replicas-1 {
		t.Errorf("%d workers after a run, want %d (one per replica but the first)", n, replicas-1)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// A worker is past its last step once Close returns, but its goroutine
	// may still be leaving: allow it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for workers() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := workers(); n > 0 {
		t.Errorf("%d workers 5 s after Close, want 0", n)
	}
	l1, err := g.Run()
	if err != nil {
		t.Fatal(err)
	}
	if l1 != l0 {
		t.Errorf("loss %v after Close, %v before: want the same", l1, l0)
	}
}

// workers counts the goroutines running a replica's worker loop.
func workers() int { return spintest.Running("train.(*replicated).work(") }
