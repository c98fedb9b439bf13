package gpu

import (
	"math/rand/v2"
	"strings"

	"rgcpred/model"
)

// TestWeights returns weights for configuration name (e.g. "gpt-b-logmix")
// with numCells cells, every tensor random and large enough that each layer
// matters for the output, reproducible from seed: He-initialised
// convolutions, random batch-norm statistics and scales, transformer
// weights at std 0.15, embeddings at 0.5. For the parity checks of
// configurations with no trained checkpoint.
func TestWeights(name string, numCells int, seed uint64) (*model.Weights, error) {
	cfg, err := model.ParseConfigName(name, numCells)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	w := model.InitWeights(cfg, rng)
	for _, p := range cfg.Params() {
		ts := w.Tensors[p.Name]
		for i := range ts {
			switch {
			case strings.HasSuffix(p.Name, "running_mean"):
				ts[i] = float32(0.2 * rng.NormFloat64())
			case strings.HasSuffix(p.Name, "running_var"):
				ts[i] = float32(0.5 + rng.Float64())
			case p.Kind == model.KindNorm && strings.HasSuffix(p.Name, ".weight"):
				ts[i] = float32(0.5 + rng.Float64())
			case p.Kind == model.KindNorm || p.Kind == model.KindBias:
				ts[i] = float32(0.1 * rng.NormFloat64())
			case p.Kind == model.KindEmbed:
				ts[i] = float32(0.5 * rng.NormFloat64())
			case p.Kind == model.KindWeight && !strings.HasPrefix(p.Name, "cnn."):
				ts[i] = float32(0.15 * rng.NormFloat64())
			}
		}
	}
	return w, nil
}
