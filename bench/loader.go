package bench

import (
	"fmt"

	"rgcpred/internal/service"
	"rgcpred/model"
	"rgcpred/model/engine"
)

// LoadEngine loads a checkpoint into the CPU inference engine with threads
// threads, for batches of up to maxBatch windows (0: every cell of the
// checkpoint), as the daemon's model.
func LoadEngine(path string, maxBatch, threads int) (*service.Model, error) {
	ck, err := model.LoadCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	if maxBatch <= 0 {
		maxBatch = len(ck.CellIDs)
	}
	e, err := engine.New(ck, maxBatch, threads)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	c := ck.Weights.Config
	cnn := model.CNNPaper
	if c.StemCh != 16 {
		cnn = model.CNNCPU
	}
	return &service.Model{
		Predictor: e,
		Cells:     append([]int(nil), ck.CellIDs...),
		MaxBatch:  maxBatch,
		Name:      fmt.Sprintf("%s-%s, %s CNN, %d cells", c.Stem, c.Head, cnn, len(ck.CellIDs)),
	}, nil
}
