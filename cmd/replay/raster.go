package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"rgcpred/base/cli"
	"rgcpred/base/plot"
	"rgcpred/bench/replay"
	"rgcpred/evaluation"
	"rgcpred/rgc"
)

// rasterOptions are the flags of the spike raster.
type rasterOptions struct {
	path    string
	cells   string
	seconds float64
}

// register adds the raster's flags to fs.
func (r *rasterOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&r.path, "raster", "", "write a raster of recorded spikes against the daemon's decisions to FILE.svg and FILE.png")
	fs.StringVar(&r.cells, "raster-cells", "",
		"cluster ids of the --raster cells, comma-separated, among the replayed ones (default: the first 4 replayed cells)")
	fs.Float64Var(&r.seconds, "raster-seconds", 10, "length of the --raster stretch in seconds, from the first predicted bin")
}

// check validates the raster's flags before the replay.
func (r *rasterOptions) check() error {
	if r.path == "" {
		return nil
	}
	if !(r.seconds > 0) {
		return fmt.Errorf("--raster-seconds %v: want more than 0", r.seconds)
	}
	if _, _, err := plot.Paths(r.path); err != nil {
		return fmt.Errorf("--raster: %w", err)
	}
	_, err := r.ids(nil)
	return err
}

// ids returns the raster's cells: --raster-cells, each one of replayed, or
// the first 4 replayed cells.
func (r *rasterOptions) ids(replayed []int) ([]int, error) {
	if r.cells == "" {
		return replayed[:min(4, len(replayed))], nil
	}
	ids, err := cli.Ints(r.cells)
	if err != nil {
		return nil, fmt.Errorf("--raster-cells: %w", err)
	}
	for _, id := range ids {
		if replayed != nil && !slices.Contains(replayed, id) {
			return nil, fmt.Errorf("--raster-cells: cell %d is not replayed", id)
		}
	}
	return ids, nil
}

// rasterTrains returns the raster's trains: for each selected cell, over
// the first seconds of the predicted bins, its recorded spikes and the
// daemon's spikes as received (after the cell's start, the bins before
// holding the recorded history), then, when some spikes came late, the
// received spikes that were on time.
func (r *rasterOptions) rasterTrains(rec *rgc.Recording, res *replay.Result, onTime [][]int) ([]string, []evaluation.CellTrains, error) {
	ids, err := r.ids(res.Cells)
	if err != nil {
		return nil, nil, err
	}
	from := res.First + 1
	to := min(res.To, from+int(r.seconds*rgc.BinRateHz))
	names := []string{"decisions received"}
	if onTime != nil {
		names = append(names, "received on time")
	}
	var cells []evaluation.CellTrains
	for _, id := range ids {
		i := slices.Index(res.Cells, id)
		recorded, err := evaluation.RecordedBins(rec, id, from, to)
		if err != nil {
			return nil, nil, fmt.Errorf("raster: %w", err)
		}
		ct := evaluation.CellTrains{ClusterID: id, From: from, To: to, Recorded: recorded}
		start := res.First
		if i < len(res.Starts) {
			start = res.Starts[i]
		}
		ct.Predicted = append(ct.Predicted, evaluation.SpikeBins(res.Spikes[i], start+1, to))
		if onTime != nil {
			ct.Predicted = append(ct.Predicted, evaluation.SpikeBins(onTime[i], start+1, to))
		}
		cells = append(cells, ct)
	}
	return names, cells, nil
}

// write draws the raster of a replay to the flag's files, as SVG and PNG,
// and names them on w; onTime is nil when no spike came late.
func (r *rasterOptions) write(w io.Writer, rec *rgc.Recording, device string, res *replay.Result, onTime [][]int) error {
	names, cells, err := r.rasterTrains(rec, res, onTime)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("replay as device %s: recorded and decided spikes", device)
	rs, err := evaluation.NewRaster(title, names, cells)
	if err != nil {
		return err
	}
	files, err := plot.SaveBoth(rs, r.path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", strings.Join(files, " and "))
	return nil
}
