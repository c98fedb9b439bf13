package gpu

import "rgcpred/model"

// TestWeights returns model.ParityWeights for configuration name (e.g.
// "gpt-b-logmix") with numCells cells: for the parity checks of
// configurations with no trained checkpoint.
func TestWeights(name string, numCells int, seed uint64) (*model.Weights, error) {
	cfg, err := model.ParseConfigName(name, numCells)
	if err != nil {
		return nil, err
	}
	return model.ParityWeights(cfg, seed), nil
}
