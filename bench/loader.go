package bench

import (
	"fmt"

	"rgcpred/model"
	"rgcpred/model/engine"
	"rgcpred/serve/modelload"
	"rgcpred/serve/service"
)

// LoadEngine loads a checkpoint into the CPU inference engine with threads
// threads and arithmetic prec, for batches of up to maxBatch windows (0:
// every cell of the checkpoint), as the daemon loads its model
// (modelload.Engine), named by its configuration for the report.
func LoadEngine(path string, maxBatch, threads int, prec engine.Precision) (*service.Model, error) {
	m, err := modelload.Engine(threads, prec)(path, maxBatch)
	if err != nil {
		return nil, err
	}
	if c, ok := configOf(m); ok {
		m.Name = reportName(c, len(m.Cells), string(engine.PrecisionOf(m.Predictor)))
	}
	return m, nil
}

// reportName names a loaded model in a report: its configuration, CNN
// preset, cell count and the arithmetic it runs in.
func reportName(c model.Config, cells int, arith string) string {
	return fmt.Sprintf("%s-%s, %s CNN, %d cells, %s", c.Stem, c.Head, c.CNNPreset(), cells, arith)
}

// configOf returns the configuration of a model served by the engine.
func configOf(m *service.Model) (model.Config, bool) {
	e, ok := m.Predictor.(interface{ Config() model.Config })
	if !ok {
		return model.Config{}, false
	}
	return e.Config(), true
}
