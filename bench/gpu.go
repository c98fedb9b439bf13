package bench

import (
	"rgcpred/model/gpu"
	"rgcpred/serve/modelload"
	"rgcpred/serve/service"
)

// LoadGPU loads a checkpoint into the GPU engine with options o, for
// batches of up to maxBatch windows (0: every cell of the checkpoint), as
// predictord --backend cuda does (modelload.GPU), named by its
// configuration for the report.
func LoadGPU(path string, maxBatch int, o gpu.Options) (*service.Model, error) {
	m, err := modelload.GPU(o)(path, maxBatch)
	if err != nil {
		return nil, err
	}
	if e, ok := m.Predictor.(*gpu.Engine); ok {
		m.Name = reportName(e.Config(), len(m.Cells), e.Describe())
	}
	return m, nil
}
