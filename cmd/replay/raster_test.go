package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/base/plot"
	"rgcpred/base/plot/plottest"
	"rgcpred/bench/replay"
	"rgcpred/evaluation"
	"rgcpred/rgc"
)

// TestReplayRaster replays 3 s of the shipped recording's test split for
// two cells through an embedded daemon serving the shipped checkpoint and
// checks --raster's two files: both decode, and the SVG draws one tick per
// recorded spike bin of the raster's cells and one per decided spike as
// received (summary.json's, after each cell's start), each row labelled.
func TestReplayRaster(t *testing.T) {
	if testing.Short() {
		t.Skip("replays through the shipped checkpoint")
	}
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	q := rec.QualityClusterIDs()
	for _, tc := range []struct {
		name, raster string
		cells        []int // replayed
		rasterCells  string
		seconds      float64
		want         []int // drawn
	}{
		{"default cells, whole replay", "r.svg", []int{q[1], q[4]}, "", 5, []int{q[1], q[4]}},
		{"one chosen cell, 1 s", "r.png", []int{q[1], q[4]}, fmt.Sprint(q[4]), 1, []int{q[4]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := []string{"--data", shipped, "--embedded", "--ckpt", filepath.Join("..", "..", "models", "gpt-a-cat-cpu.ckpt"),
				"--threads", "1", "--as-fast-as-possible", "--quiet", "--seconds", "3", "--cells", joinInts(tc.cells), "--out", out,
				"--raster", filepath.Join(out, tc.raster), "--raster-seconds", fmt.Sprint(tc.seconds)}
			if tc.rasterCells != "" {
				args = append(args, "--raster-cells", tc.rasterCells)
			}
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			base := filepath.Join(out, "r")
			if !strings.Contains(stdout.String(), "wrote "+base+".svg and "+base+".png") {
				t.Errorf("output does not name the raster files:\n%s", stdout.String())
			}
			f, err := plottest.Read(base+".svg", base+".png")
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(out, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			var sum struct {
				Result replay.Result `json:"result"`
			}
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			res := &sum.Result
			from := res.First + 1
			to := min(res.To, from+int(tc.seconds*rgc.BinRateHz))
			recorded, predicted := 0, 0
			for _, id := range tc.want {
				bins, err := evaluation.RecordedBins(rec, id, from, to)
				if err != nil {
					t.Fatal(err)
				}
				recorded += len(bins)
				for i, c := range res.Cells {
					if c == id {
						predicted += len(evaluation.SpikeBins(res.Spikes[i], res.Starts[i]+1, to))
					}
				}
				if !strings.Contains(f.Text, fmt.Sprintf("cell %d", id)) {
					t.Errorf("raster does not label cell %d", id)
				}
			}
			if tc.seconds*rgc.BinRateHz >= float64(res.To-from) && predicted == 0 {
				t.Fatal("no decided spikes in the whole replay; the check below would be empty")
			}
			if got := f.RasterTicks(plot.RecordedColour); got != recorded {
				t.Errorf("%d recorded ticks, want %d spike bins in [%d, %d) and the legend's", got, recorded, from, to)
			}
			if got := f.RasterTicks(plot.Colour(0)); got != predicted || !strings.Contains(f.Text, "decisions received") {
				t.Errorf("%d decided ticks, want %d spikes and the legend's", got, predicted)
			}
		})
	}
}

// TestRasterTrains builds a raster's trains from a replay's result: the
// default cells are the first 4 replayed, the decided trains start after
// each cell's history and end with the stretch, and a second row of the
// spikes on time appears only when some came late.
func TestRasterTrains(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	q := rec.QualityClusterIDs()
	first := 724268
	res := &replay.Result{First: first, To: first + 3001, Cells: q[:5], Starts: []int{first, first + 16, first + 32, first + 48, first + 64},
		Spikes: [][]int{{first + 1, first + 500, first + 2999}, {first + 10, first + 17}, nil, {first + 1000}, {first + 70}}}
	onTime := [][]int{{first + 500}, {first + 17}, nil, nil, {first + 70}}
	for _, tc := range []struct {
		name    string
		o       rasterOptions
		onTime  [][]int
		ids     []int
		names   int
		decided [][]int // per drawn cell, the trains' spike bins
		err     string
	}{
		{"default cells, whole stretch", rasterOptions{seconds: 10}, nil, q[:4], 1,
			[][]int{{first + 1, first + 500, first + 2999}, {first + 17}, nil, {first + 1000}}, ""},
		{"chosen cell, first 0.6 s, late spikes", rasterOptions{cells: fmt.Sprint(q[0]), seconds: 0.6}, onTime, q[:1], 2,
			[][]int{{first + 1, first + 500}, {first + 500}}, ""},
		{"a cell not replayed", rasterOptions{cells: fmt.Sprint(q[6]), seconds: 1}, nil, nil, 0, nil, "is not replayed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, cells, err := tc.o.rasterTrains(rec, res, tc.onTime)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != tc.names || len(cells) != len(tc.ids) {
				t.Fatalf("%d names, %d cells; want %d and %d", len(names), len(cells), tc.names, len(tc.ids))
			}
			to := min(res.To, first+1+int(tc.o.seconds*rgc.BinRateHz))
			for i, c := range cells {
				want, _ := evaluation.RecordedBins(rec, tc.ids[i], first+1, to)
				if c.ClusterID != tc.ids[i] || c.From != first+1 || c.To != to || !slices.Equal(c.Recorded, want) || len(c.Predicted) != tc.names {
					t.Fatalf("cell %d: %+v, want cell %d over [%d, %d) with %d recorded spikes", i, c, tc.ids[i], first+1, to, len(want))
				}
				if tc.names == 1 && !slices.Equal(c.Predicted[0], tc.decided[i]) {
					t.Errorf("cell %d: decided %v, want %v", c.ClusterID, c.Predicted[0], tc.decided[i])
				}
			}
			if tc.names == 2 && (!slices.Equal(cells[0].Predicted[0], tc.decided[0]) || !slices.Equal(cells[0].Predicted[1], tc.decided[1])) {
				t.Errorf("decided %v, on time %v; want %v", cells[0].Predicted[0], cells[0].Predicted[1], tc.decided)
			}
		})
	}
}
