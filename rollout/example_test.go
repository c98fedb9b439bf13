package rollout_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rollout"
)

// ExampleRun rolls a predictor out autoregressively on the test split of a
// small synthetic recording: the exact oracle of its cells, with the
// median rule and staggered starts. Every cell's generated train covers the
// same compared bins as its recorded one, so the two can be scored with
// rollout.Metrics.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "rollout-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	raw, truth, err := synth.Generate(context.Background(), synth.Config{Cells: 2, Minutes: 0.6, Seed: 5})
	if err != nil {
		log.Fatal(err)
	}
	if err := raw.Write(dir); err != nil {
		log.Fatal(err)
	}
	if err := truth.Save(dir); err != nil {
		log.Fatal(err)
	}
	rec, err := rgc.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	oracle, err := synth.OracleFromDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	res, err := rollout.Run(context.Background(), rec, oracle, rollout.Options{Split: rgc.Test, Cells: []int{0, 1}, Stagger: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, tr := range res.Trains {
		covers := len(tr.Generated) == res.To-res.From && len(tr.Recorded) == res.To-res.From
		fmt.Printf("cell %d: first window %d bins after the unstaggered one; trains cover [From, To): %v; predictions made: %v\n",
			tr.ClusterID, tr.Start-(res.From-1), covers, tr.Windows > 0)
	}
	// Output:
	// cell 0: first window 0 bins after the unstaggered one; trains cover [From, To): true; predictions made: true
	// cell 1: first window 40 bins after the unstaggered one; trains cover [From, To): true; predictions made: true
}

// ExampleStartOffsetsByID shows the stagger rule for cells known by
// cluster id: each starts by its index in the whole ascending cell list.
func ExampleStartOffsetsByID() {
	offsets, err := rollout.StartOffsetsByID([]int{42, 7, 19}, []int{3, 7, 19, 42}, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(offsets)
	// Output: [60 20 40]
}
