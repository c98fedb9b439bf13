package evaluation

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"rgcpred/rgc/synth"
)

// TestKeepTrains keeps the rollout trains of two cells for a raster: the
// kept recorded train is the recording's spike bins, the kept predicted
// train the rollout's own spikes (all of them when the stretch covers the
// rollout, so they add up to the cell's generated spikes), the raster has
// a row per cell and train with every kept spike, and the JSON leaves the
// trains out.
func TestKeepTrains(t *testing.T) {
	cfg, dir := synthConfig(t, synth.Config{Cells: 3, Minutes: 0.6, Seed: 5})
	ids := cfg.Rec.ClusterIDs()
	keep := []int{ids[2], ids[0]}
	for _, tc := range []struct {
		name    string
		bins    int
		stagger bool
	}{
		{"whole rollout", 0, false},
		{"whole rollout, staggered", 0, true},
		{"first 2 s", 2000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Stagger = tc.stagger
			c.Models = []ModelSpec{OracleSpec(dir, cfg.Rec.StimMode), ZeroSpec(cfg.Rec, cfg.Cells, false)}
			c.Keep = &KeepTrains{ClusterIDs: keep, Bins: tc.bins}
			r, err := Evaluate(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			from, to := r.Bins[0], r.Bins[1]
			if tc.bins > 0 {
				to = min(to, from+tc.bins)
			}
			// A row per cell and train; the recorded trains drawn once.
			wantSpikes, wantRows := 0, len(keep)*(1+len(r.Models))
			for _, ct := range r.Models[0].Trains {
				wantSpikes += len(ct.Recorded)
			}
			for _, m := range r.Models {
				if len(m.Trains) != len(keep) {
					t.Fatalf("%s kept %d trains, want %d", m.Name, len(m.Trains), len(keep))
				}
				for i, ct := range m.Trains {
					rec, err := RecordedBins(cfg.Rec, keep[i], from, to)
					if err != nil {
						t.Fatal(err)
					}
					if ct.ClusterID != keep[i] || ct.From != from || ct.To != to || !slices.Equal(ct.Recorded, rec) || len(ct.Predicted) != 1 {
						t.Fatalf("%s cell %d: trains %d [%d, %d), %d recorded spikes, %d predicted trains; want cell %d [%d, %d), %d spikes, 1 train",
							m.Name, i, ct.ClusterID, ct.From, ct.To, len(ct.Recorded), len(ct.Predicted), keep[i], from, to, len(rec))
					}
					var gen float64
					for _, s := range m.Cells {
						if s.ClusterID == keep[i] {
							gen = s.GeneratedSpikes
						}
					}
					// Under stagger the generated count also holds the
					// recorded history before the cell's start, which the
					// kept train leaves out.
					if n := len(ct.Predicted[0]); (tc.bins == 0 && !tc.stagger && float64(n) != gen) || float64(n) > gen {
						t.Errorf("%s cell %d: %d kept predicted spikes, generated %v", m.Name, keep[i], n, gen)
					}
					wantSpikes += len(ct.Predicted[0])
				}
			}
			ra, err := r.Raster()
			if err != nil {
				t.Fatal(err)
			}
			rows, spikes, err := ra.Count()
			if err != nil {
				t.Fatal(err)
			}
			if rows != wantRows || spikes != wantSpikes || !slices.Equal(ra.Names, []string{"oracle", "zero"}) {
				t.Errorf("raster: %d rows, %d spikes, names %q; want %d rows, %d spikes, oracle and zero", rows, spikes, ra.Names, wantRows, wantSpikes)
			}
			js, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(js), "Recorded") || strings.Contains(string(js), "Predicted") {
				t.Error("the JSON holds the kept trains")
			}
		})
	}
}
