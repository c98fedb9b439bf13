package engine_test

import (
	"fmt"
	"log"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/rgc"
)

// ExampleNew loads the shipped checkpoint and predicts one cell's next
// spike from a window of the shipped recording, binned in the stimulus mode
// the model was trained on (predictord refuses frames of another mode).
func ExampleNew() {
	ck, err := model.LoadCheckpoint("../../models/gpt-a-cat-cpu.ckpt")
	if err != nil {
		log.Fatal(err)
	}
	rec, err := rgc.LoadMode("../../data/chicken-17-08-21", ck.StimMode)
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(ck, 1, 1) // windows per call, threads
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	// The window of the checkpoint's first cell that ends 2 s into the test
	// split: the stimulus rows and the cell's recorded spikes.
	id := ck.CellIDs[0]
	cell, ok := rec.CellIndex(id)
	if !ok {
		log.Fatalf("recording has no cell %d", id)
	}
	from, _ := rec.SplitRange(rgc.Test)
	t := from + rgc.WindowBins - 1 + 2000
	win := make([]float32, rgc.WindowLen)
	recorded := rec.Window(cell, t, win)

	probs := make([]float32, rgc.NumClasses)
	if err := e.Predict(&rgc.Batch{Inputs: win, Cells: []int{id}, Ends: []int{t}}, probs); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("cell %d, window ending at bin %d: median class %d, P(no spike within %d bins) %.2f, recorded class %d\n",
		id, t, model.Median(probs), rgc.Horizon, probs[rgc.NoSpikeClass], recorded)
	// Output: cell 20, window ending at bin 726268: median class 80, P(no spike within 80 bins) 0.81, recorded class 80
}
