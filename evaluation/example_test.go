package evaluation_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"rgcpred/evaluation"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rollout"
)

// ExampleEvaluate scores the zero-input baseline and the exact oracle of a
// small synthetic recording on its test split, compares them per cell and
// prints what the report holds (Report.Print prints the table itself).
func ExampleEvaluate() {
	dir, err := os.MkdirTemp("", "evaluation-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	raw, truth, err := synth.Generate(context.Background(), synth.Config{Cells: 4, Minutes: 2.5, Seed: 3})
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
	cells := []int{0, 1, 2, 3}
	cfg := evaluation.Config{
		Options: evaluation.Options{Rec: rec, Cells: cells, Split: rgc.Test, Batch: 64,
			Resamples: rollout.DefaultResamples, Seed: 1},
		SigmaMs: rollout.DefaultSigmaMs,
		Compare: []string{"oracle:zero"},
	}
	env := evaluation.SpecEnv{Rec: rec, Data: dir, Cells: cells}
	for _, spec := range []string{"zero", "oracle"} {
		sp, err := evaluation.ParseSpec(spec, env)
		if err != nil {
			log.Fatal(err)
		}
		cfg.Models = append(cfg.Models, sp)
	}
	r, err := evaluation.Evaluate(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range r.Models {
		fmt.Printf("%s (%s): %d cells, %d summaries\n", m.Name, m.Kind, len(m.Cells), len(m.Summary))
	}
	c := r.Comparisons[0]
	nll := c.Metrics["nll"]
	fmt.Printf("%s: the oracle has the lower NLL in %d of %d cells\n", c.Name, nll.ABetter, nll.N)
	// Output:
	// zero (zero): 4 cells, 4 summaries
	// oracle (oracle): 4 cells, 4 summaries
	// oracle - zero: the oracle has the lower NLL in 4 of 4 cells
}

// ExampleWriteTable prints a score table in the layout every command
// shares; a metric a row lacks (here a replay's NLL) prints as n/a. (The
// columns are padded to their width; the example trims the lines' ends.)
func ExampleWriteTable() {
	var b strings.Builder
	sc := evaluation.Scoring{Recording: "chicken", Split: "test", Bins: [2]int{1024, 9000}, SigmaMs: 60, TauBins: 59.51, Resamples: 2000}
	s := rollout.Summary{IQM: 0.5, Lo: 0.25, Hi: 0.75, N: 4}
	evaluation.WriteTable(&b, &evaluation.Table{Scoring: sc, Rows: []evaluation.Row{
		{Name: "gpt", Cells: 4, Summary: map[string]rollout.Summary{"nll": s, "van_rossum": s, "schreiber": s, "pearson": s}},
		{Name: "replay", Cells: 4, Summary: map[string]rollout.Summary{"van_rossum": s, "schreiber": s, "pearson": s}},
	}})
	for line := range strings.Lines(b.String()) {
		fmt.Println(strings.TrimRight(line, " \n"))
	}
	// Output:
	// chicken, split test, rollout bins [1024, 9000), smoothing 60 ms (59.51 bins); IQM over cells [95% bootstrap CI, 2000 resamples]
	// model   cells  NLL (nats)                  Van Rossum                  Schreiber                   Pearson
	// gpt         4  0.5000 [0.2500, 0.7500]     0.5000 [0.2500, 0.7500]     0.5000 [0.2500, 0.7500]     0.5000 [0.2500, 0.7500]
	// replay      4  n/a                         0.5000 [0.2500, 0.7500]     0.5000 [0.2500, 0.7500]     0.5000 [0.2500, 0.7500]
}
