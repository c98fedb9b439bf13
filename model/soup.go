package model

import (
	"errors"
	"fmt"
	"slices"
)

// Soup returns the uniform average of the checkpoints' weights, a "model
// soup" (Wortsman et al. 2022): models fine-tuned from one parent stay in
// one basin of the loss, so their average is one model that is usually
// better than each, at the cost of one.
//   - Batch-norm running statistics are averaged like every other tensor.
//   - The checkpoints must share configuration, cells, time base and
//     stimulus mode.
//   - The result carries the first one's metadata, no training state and
//     no validation NLL (the caller scores it).
func Soup(cks []*Checkpoint) (*Checkpoint, error) {
	if len(cks) == 0 {
		return nil, errors.New("soup: no checkpoints")
	}
	first := cks[0]
	for i, c := range cks[1:] {
		switch {
		case c.Weights.Config != first.Weights.Config:
			return nil, fmt.Errorf("soup: checkpoint %d holds %s, checkpoint 0 %s", i+1, c.Weights.Config.Name(), first.Weights.Config.Name())
		case !slices.Equal(c.CellIDs, first.CellIDs):
			return nil, fmt.Errorf("soup: checkpoint %d has other cells than checkpoint 0", i+1)
		case c.StimMode != first.StimMode:
			return nil, fmt.Errorf("soup: checkpoint %d reads %s bins, checkpoint 0 %s", i+1, c.StimMode, first.StimMode)
		case c.BinRateHz != first.BinRateHz || c.WindowBins != first.WindowBins || c.Horizon != first.Horizon:
			return nil, fmt.Errorf("soup: checkpoint %d has another time base than checkpoint 0", i+1)
		}
	}
	w := NewWeights(first.Weights.Config)
	inv := 1 / float64(len(cks))
	for name, dst := range w.Tensors {
		for j := range dst {
			var s float64
			for _, c := range cks {
				s += float64(c.Weights.Tensors[name][j])
			}
			dst[j] = float32(s * inv)
		}
	}
	out := &Checkpoint{
		Weights: w, CellIDs: slices.Clone(first.CellIDs), BinRateHz: first.BinRateHz,
		WindowBins: first.WindowBins, Horizon: first.Horizon, StimMode: first.StimMode,
		Provenance: first.Provenance,
	}
	out.Provenance.ValNLL = 0
	return out, out.Validate()
}
