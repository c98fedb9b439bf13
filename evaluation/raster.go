package evaluation

import (
	"fmt"

	"rgcpred/base/plot"
	"rgcpred/rgc"
	"rgcpred/rollout"
)

// KeepTrains selects rollout spike trains an evaluation keeps in memory for
// a raster (ModelResult.Trains): a few cells over a stretch at the start of
// the compared bins, from each model's first repeat. The trains are not
// part of the JSON.
type KeepTrains struct {
	// ClusterIDs are the cells kept, in raster order; each must be one of
	// the evaluated cells.
	ClusterIDs []int
	// Bins is the length of the stretch kept, from the first compared bin
	// (Scoring.Bins[0]); 0 keeps all compared bins.
	Bins int
}

// CellTrains are one cell's spike trains over the bins [From, To), as the
// bins holding a spike: the recorded train and one or more predicted ones.
type CellTrains struct {
	// ClusterID is the cell's cluster id.
	ClusterID int
	// From and To delimit the bins.
	From, To int
	// Recorded holds the bins with a recorded spike.
	Recorded []int
	// Predicted holds each predicted train's spike bins: a model's rollout
	// after the cell's first window (the bins before it hold the recorded
	// history), or the decisions a device received.
	Predicted [][]int
}

// keptTrains returns the trains of roll that k selects; cells are the
// evaluated cells' cluster ids in the order of roll.Trains.
func (k *KeepTrains) keptTrains(roll *rollout.Result) ([]CellTrains, error) {
	from, to := roll.From, roll.To
	if k.Bins > 0 {
		to = min(to, from+k.Bins)
	}
	out := make([]CellTrains, 0, len(k.ClusterIDs))
	for _, id := range k.ClusterIDs {
		var tr *rollout.Train
		for i := range roll.Trains {
			if roll.Trains[i].ClusterID == id {
				tr = &roll.Trains[i]
			}
		}
		if tr == nil {
			return nil, fmt.Errorf("raster cell %d is not an evaluated cell", id)
		}
		ct := CellTrains{ClusterID: id, From: from, To: to, Predicted: [][]int{nil}}
		for b := from; b < to; b++ {
			j := b - roll.From
			if tr.Recorded[j] > 0 {
				ct.Recorded = append(ct.Recorded, b)
			}
			if b > tr.Start && tr.Generated[j] > 0 {
				ct.Predicted[0] = append(ct.Predicted[0], b)
			}
		}
		out = append(out, ct)
	}
	return out, nil
}

// RecordedBins returns the bins in [from, to) holding a recorded spike of
// the cell with the given cluster id, ascending, each once.
func RecordedBins(rec *rgc.Recording, id, from, to int) ([]int, error) {
	ci, ok := rec.CellIndex(id)
	if !ok {
		return nil, fmt.Errorf("cell %d is not in %s", id, rec.Name)
	}
	var out []int
	for _, b := range rec.Cells[ci].SpikeBins {
		if bin := int(b); bin >= from && bin < to && (len(out) == 0 || out[len(out)-1] != bin) {
			out = append(out, bin)
		}
	}
	return out, nil
}

// SpikeBins returns the bins in [from, to) of a sorted list of spike bins.
func SpikeBins(bins []int, from, to int) []int {
	var out []int
	for _, b := range bins {
		if b >= from && b < to {
			out = append(out, b)
		}
	}
	return out
}

// NewRaster draws cells' trains as a spike raster over their bins, times in
// seconds of the recording: per cell its recorded train, then each
// predicted train, Predicted[j] labelled names[j].
func NewRaster(title string, names []string, cells []CellTrains) (*plot.Raster, error) {
	if len(cells) == 0 {
		return nil, fmt.Errorf("raster %q: no cells", title)
	}
	secs := func(bins []int) []float64 {
		t := make([]float64, len(bins))
		for i, b := range bins {
			t[i] = float64(b) / rgc.BinRateHz
		}
		return t
	}
	r := &plot.Raster{Title: title, XLabel: "time in the recording (s)", Names: names,
		From: float64(cells[0].From) / rgc.BinRateHz, To: float64(cells[0].To) / rgc.BinRateHz}
	for _, c := range cells {
		if len(c.Predicted) != len(names) {
			return nil, fmt.Errorf("raster %q: cell %d has %d predicted trains for %d names", title, c.ClusterID, len(c.Predicted), len(names))
		}
		rc := plot.RasterCell{Name: fmt.Sprintf("cell %d", c.ClusterID), Recorded: secs(c.Recorded)}
		for _, p := range c.Predicted {
			rc.Predicted = append(rc.Predicted, secs(p))
		}
		r.Cells = append(r.Cells, rc)
	}
	return r, nil
}

// Raster draws the kept trains of every model of r (Options.Keep) as a
// spike raster: per cell the recorded spikes, then each model's rollout
// (its first repeat), rows named by model.
func (r *Report) Raster() (*plot.Raster, error) {
	if len(r.Models) == 0 || len(r.Models[0].Trains) == 0 {
		return nil, fmt.Errorf("raster: no trains kept (Options.Keep)")
	}
	names := make([]string, len(r.Models))
	cells := make([]CellTrains, len(r.Models[0].Trains))
	for i, m := range r.Models {
		names[i] = m.Name
		if len(m.Trains) != len(cells) {
			return nil, fmt.Errorf("raster: model %s kept %d cells' trains, %s %d", m.Name, len(m.Trains), r.Models[0].Name, len(cells))
		}
		for j, ct := range m.Trains {
			if i == 0 {
				cells[j] = CellTrains{ClusterID: ct.ClusterID, From: ct.From, To: ct.To, Recorded: ct.Recorded}
			}
			cells[j].Predicted = append(cells[j].Predicted, ct.Predicted...)
		}
	}
	title := fmt.Sprintf("%s split: recorded and rolled-out spikes (policy %s)", r.Split, r.Policy)
	return NewRaster(title, names, cells)
}
