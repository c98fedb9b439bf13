package rollout

import (
	"context"
	"math/rand/v2"
	"testing"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// benchRecording has 60 cells and a test split of 3000 bins.
func benchRecording() (*rgc.Recording, []int) {
	const bins = 30000
	var spikes [][]int32
	cells := make([]int, 60)
	for i := range cells {
		spikes = append(spikes, every(bins, 40+i, i))
		cells[i] = i
	}
	return testRecording(bins, spikes...), cells
}

// BenchmarkRolloutOverhead measures the rollout's own cost per window
// (filling the window from the recording and the ring buffer, median,
// stepping) with a predictor that costs nothing: class 0, so every cell
// steps one bin per window.
func BenchmarkRolloutOverhead(b *testing.B) {
	rec, cells := benchRecording()
	windows := 0
	for b.Loop() {
		res, err := Run(context.Background(), rec, constPredictor(0), Options{Split: rgc.Test, Cells: cells})
		if err != nil {
			b.Fatal(err)
		}
		windows += len(cells) * res.Trains[0].Windows
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(windows), "ns/window")
}

// BenchmarkEngineWindow measures the inference engine (CPU preset, gpt-a,
// cat head, random weights, 2 threads) on rollout-sized batches of 60
// windows, for comparison with BenchmarkRolloutOverhead: the rollout runs at
// the engine's speed when its overhead per window is a small fraction.
func BenchmarkEngineWindow(b *testing.B) {
	rec, cells := benchRecording()
	cfg, err := model.NewConfig(model.StemGPTA, model.HeadCat, model.CNNCPU, len(cells))
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int, len(cells))
	for i := range ids {
		ids[i] = rec.Cells[i].ClusterID
	}
	e, err := engine.NewFromWeights(model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2))), ids, len(cells), 2)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	first, _, _ := rec.WindowRange(rgc.Test)
	batch := &rgc.Batch{}
	refs := make([]rgc.WindowRef, len(cells))
	for i := range refs {
		refs[i] = rgc.WindowRef{Cell: i, T: first + i}
	}
	rec.FillBatch(refs, batch, nil)
	out := make([]float32, len(cells)*rgc.NumClasses)
	windows := 0
	for b.Loop() {
		if err := e.Predict(batch, out); err != nil {
			b.Fatal(err)
		}
		windows += len(cells)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(windows), "ns/window")
}
