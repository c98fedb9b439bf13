package engine_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// ExampleNewFromWeights builds an engine from a configuration and its
// weights and predicts one window. A served model comes from a checkpoint
// instead (model.LoadCheckpoint, then engine.New); the weights here are
// freshly initialised, with the head's bias raised on the "no spike" class
// so that the prediction is clear-cut.
func ExampleNewFromWeights() {
	cfg, err := model.ParseConfigName("gpt-a-cat-cpu", 2)
	if err != nil {
		log.Fatal(err)
	}
	w := model.InitWeights(cfg, rand.New(rand.NewPCG(1, 2)))
	w.Get(model.LayerHead.Bias())[rgc.NoSpikeClass] = 6

	// Embedding rows 0 and 1 belong to the cells with cluster ids 17 and 42;
	// batches of up to 4 windows on 1 thread.
	e, err := engine.NewFromWeights(w, []int{17, 42}, 4, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	// One window for cell 42: 5 rows x 1024 bins (the four LEDs and the
	// spike history), all dark and silent here, ending at bin 1023.
	b := &rgc.Batch{Inputs: make([]float32, rgc.WindowLen), Cells: []int{42}, Ends: []int{1023}}
	probs := make([]float32, rgc.NumClasses)
	if err := e.Predict(b, probs); err != nil {
		log.Fatal(err)
	}
	if err := model.CheckDist(probs); err != nil {
		log.Fatal(err)
	}
	k := model.Median(probs)
	fmt.Printf("%d classes; median class %d (no spike within %d bins), p = %.2f\n", len(probs), k, rgc.Horizon, probs[k])
	// Output: 81 classes; median class 80 (no spike within 80 bins), p = 0.85
}
