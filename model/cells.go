package model

import (
	"fmt"
	"slices"
)

// WithCells returns the checkpoint's weights re-cut to the cells with
// cluster ids ids, in that order: a model's only per-cell tensor is its
// cell embedding (docs/model.md section 2), one row per cell, so every
// other tensor is shared and copied unchanged. A cell the checkpoint holds
// keeps its row; a new cell's row starts at the mean of the checkpoint's
// rows, the population's average cell, so that training a model on more
// cells than it was trained on starts from its learnt features. added
// counts the new cells. The checkpoint is not modified.
func (c *Checkpoint) WithCells(ids []int) (w *Weights, added int, err error) {
	if len(ids) == 0 {
		return nil, 0, fmt.Errorf("re-cut checkpoint: no cells")
	}
	row := make(map[int]int, len(c.CellIDs))
	for i, id := range c.CellIDs {
		row[id] = i
	}
	seen := make(map[int]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return nil, 0, fmt.Errorf("re-cut checkpoint: cell %d twice", id)
		}
		seen[id] = true
	}
	cfg := c.Weights.Config
	d := cfg.Width()
	old := c.Weights.Tensors[ParamCellEmb]
	if len(old) != cfg.NumCells*d {
		return nil, 0, fmt.Errorf("re-cut checkpoint: cell embedding holds %d values, want %d x %d", len(old), cfg.NumCells, d)
	}
	mean := make([]float32, d)
	for i := range cfg.NumCells {
		for j := range d {
			mean[j] += old[i*d+j] / float32(cfg.NumCells)
		}
	}
	cfg.NumCells = len(ids)
	w = &Weights{Config: cfg, Tensors: make(map[string][]float32, len(c.Weights.Tensors))}
	for name, t := range c.Weights.Tensors {
		if name != ParamCellEmb {
			w.Tensors[name] = slices.Clone(t)
		}
	}
	emb := make([]float32, len(ids)*d)
	for i, id := range ids {
		src := mean
		if r, ok := row[id]; ok {
			src = old[r*d : (r+1)*d]
		} else {
			added++
		}
		copy(emb[i*d:(i+1)*d], src)
	}
	w.Tensors[ParamCellEmb] = emb
	if err := w.Check(); err != nil {
		return nil, 0, fmt.Errorf("re-cut checkpoint: %w", err)
	}
	return w, added, nil
}
