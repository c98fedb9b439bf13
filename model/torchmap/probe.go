package torchmap

import (
	"errors"
	"fmt"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/model/safetensors"
	"rgcpred/rgc"
)

// Probe tensor names: n real windows with the Go engine's outputs, for
// checking a PyTorch load of an exported checkpoint (tools/torchcheck.py).
const (
	ProbeInput     = "input"      // F32 [n, 5, 1024]: model input windows
	ProbeCellRow   = "cell_row"   // I64 [n]: embedding row of each window's cell
	ProbeClusterID = "cluster_id" // I64 [n]: the cell's cluster id
	ProbeEnd       = "end"        // I64 [n]: the window's last bin
	ProbeLogits    = "logits"     // F32 [n, HeadOut]: raw head outputs
	ProbeProb      = "prob"       // F32 [n, 81]: class probabilities
)

// Probe returns n windows of rec's test split, spread evenly over time and
// cycling through the checkpoint's cells that rec holds, with the Go
// engine's logits and class probabilities for each.
func Probe(ck *model.Checkpoint, rec *rgc.Recording, n int) (*safetensors.File, error) {
	if n < 1 {
		return nil, fmt.Errorf("probe: %d windows", n)
	}
	if err := ck.CheckInput(rec.StimMode); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	var cells, rows []int
	for row, id := range ck.CellIDs {
		if i, ok := rec.CellIndex(id); ok {
			cells, rows = append(cells, i), append(rows, row)
		}
	}
	if len(cells) == 0 {
		return nil, errors.New("probe: the recording holds none of the checkpoint's cells")
	}
	first, _, nw := rec.WindowRange(rgc.Test)
	if nw < 1 {
		return nil, errors.New("probe: the recording's test split has no windows")
	}
	refs := make([]rgc.WindowRef, n)
	cellRow, cluster, end := make([]int64, n), make([]int64, n), make([]int64, n)
	for i := range refs {
		k := i % len(cells)
		refs[i] = rgc.WindowRef{Cell: cells[k], T: first + int(int64(i)*int64(nw)/int64(n))}
		cellRow[i], cluster[i], end[i] = int64(rows[k]), int64(ck.CellIDs[rows[k]]), int64(refs[i].T)
	}
	var b rgc.Batch
	rec.FillBatch(refs, &b, nil)
	eng, err := engine.New(ck, n, 1)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	defer eng.Close()
	cfg := ck.Weights.Config
	logits := make([]float32, n*cfg.HeadOut())
	prob := make([]float32, n*rgc.NumClasses)
	if err := eng.Logits(&b, logits); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	if err := eng.Predict(&b, prob); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	return &safetensors.File{
		Metadata: map[string]string{"rgcpred.probe": fmt.Sprintf("%d test-split windows of %s; Go engine outputs of %s", n, rec.Name, cfg.Name())},
		Tensors: []safetensors.Tensor{
			safetensors.FromFloat32(ProbeInput, []int{n, cfg.InRows, cfg.InBins}, b.Inputs),
			safetensors.FromInt64(ProbeCellRow, []int{n}, cellRow),
			safetensors.FromInt64(ProbeClusterID, []int{n}, cluster),
			safetensors.FromInt64(ProbeEnd, []int{n}, end),
			safetensors.FromFloat32(ProbeLogits, []int{n, cfg.HeadOut()}, logits),
			safetensors.FromFloat32(ProbeProb, []int{n, rgc.NumClasses}, prob),
		},
	}, nil
}
