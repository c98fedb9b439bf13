package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/base/plot"
	"rgcpred/base/plot/plottest"
	"rgcpred/evaluation"
	"rgcpred/rgc"
)

// TestEvalRaster runs `trainer eval --raster` on the shipped recording and
// checkpoint with a small budget (2 s of rollout, two cells) and checks the
// raster's two files: both decode, and the SVG draws one tick per recorded
// spike bin of the chosen cells and one per spike of each model's rollout
// (the JSON's generated spikes), in the model's colour, named in the legend.
func TestEvalRaster(t *testing.T) {
	if testing.Short() {
		t.Skip("rolls out the shipped checkpoint")
	}
	data, ckpt := filepath.Join("..", "..", "data", "chicken-17-08-21"), filepath.Join("..", "..", "models", "gpt-a-cat-cpu.ckpt")
	rec, err := rgc.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	q := rec.QualityClusterIDs()
	ids := []int{q[1], q[2]}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, raster string
		seconds      float64
		cells        []int
	}{
		// A raster longer than the rollout keeps all of it.
		{"chosen cells, png name", "r.png", 5, ids},
		{"default cells, no extension", "r", 1, q[:4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jsonPath := filepath.Join(dir, tc.name+".json")
			args := []string{"--data", data, "--ckpt", ckpt, "--baseline", "zero", "--seconds", "2", "--nll-stride", "20000",
				"--threads", "1", "--json", jsonPath, "--raster", filepath.Join(dir, tc.raster), "--raster-seconds", fmt.Sprint(tc.seconds)}
			if len(tc.cells) == 2 {
				args = append(args, "--raster-cells", fmt.Sprintf("%d, %d", tc.cells[0], tc.cells[1]))
			}
			out, err := captureStdout(t, func() error { return runEval(context.Background(), args) })
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(dir, strings.TrimSuffix(tc.raster, ".png"))
			if !strings.Contains(out, "wrote "+base+".svg and "+base+".png") {
				t.Errorf("output does not name the raster files:\n%s", out)
			}
			f, err := plottest.Read(base+".svg", base+".png")
			if err != nil {
				t.Fatal(err)
			}
			var rep evaluation.Report
			if b, err := os.ReadFile(jsonPath); err != nil || json.Unmarshal(b, &rep) != nil {
				t.Fatalf("report %s: %v", jsonPath, err)
			}
			from, to := rep.Bins[0], rep.Bins[1]
			to = min(to, from+int(tc.seconds*rgc.BinRateHz))
			recorded := 0
			for _, id := range tc.cells {
				bins, err := evaluation.RecordedBins(rec, id, from, to)
				if err != nil {
					t.Fatal(err)
				}
				recorded += len(bins)
				if !strings.Contains(f.Text, fmt.Sprintf("cell %d", id)) {
					t.Errorf("raster does not label cell %d", id)
				}
			}
			if got := f.RasterTicks(plot.RecordedColour); got != recorded {
				t.Errorf("%d recorded ticks, want %d spike bins of cells %v in [%d, %d) and the legend's", got, recorded, tc.cells, from, to)
			}
			for j, m := range rep.Models {
				want := 0
				if to == rep.Bins[1] {
					for _, c := range m.Cells {
						for _, id := range tc.cells {
							if c.ClusterID == id {
								want += int(c.GeneratedSpikes)
							}
						}
					}
				}
				got := f.RasterTicks(plot.Colour(j))
				if (to == rep.Bins[1] && got != want) || got < 0 || !strings.Contains(f.Text, m.Name) {
					t.Errorf("model %s: %d ticks, want %d (its generated spikes) and a legend entry", m.Name, got, want)
				}
			}
		})
	}
}
