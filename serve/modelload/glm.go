package modelload

import (
	"fmt"

	"rgcpred/rgc"
	"rgcpred/rgc/glm"
	"rgcpred/rollout"
	"rgcpred/serve/service"
)

// WithGLM returns a loader that serves load's model mixed with the GLM
// fitted by `trainer glm` (its JSON file at glmPath), the GLM reading
// nothing but the windows (glm.NewWindowPredictor): each window's class
// probabilities are (1-weight) times the model's plus weight times the
// GLM's (rgc.Mixture). The model must read causal bins and the GLM must
// know every cell of the model. The GLM runs on the calling thread; the
// engine's counters and its announced batches (rgc.Expecter) pass through,
// and decisions are published when the whole call ends (the mixture needs
// both members' windows). On reload the GLM file is read again.
func WithGLM(load service.Loader, glmPath string, weight float64) service.Loader {
	return func(path string, maxBatch int) (*service.Model, error) {
		if !(weight > 0 && weight < 1) {
			return nil, fmt.Errorf("GLM mixture weight %v: want a value in (0, 1)", weight)
		}
		m, err := load(path, maxBatch)
		if err != nil {
			return nil, err
		}
		p, err := glmFor(m, glmPath)
		if err != nil {
			if m.Close != nil {
				_ = m.Close()
			}
			return nil, err
		}
		members := []rgc.Predictor{m.Predictor, p}
		mix, err := rgc.NewMixture(members, []float64{1 - weight, weight})
		if err != nil {
			if m.Close != nil {
				_ = m.Close()
			}
			return nil, fmt.Errorf("GLM mixture: %w", err)
		}
		mixed := *m
		mixed.Predictor = &mixServed{Mixture: mix, members: members}
		mixed.Name = fmt.Sprintf("%s, mixed with the GLM %s at weight %g (the GLM reading the windows)", m.Name, glmPath, weight)
		return &mixed, nil
	}
}

// glmFor loads the GLM at path as a window predictor for the cells of m.
func glmFor(m *service.Model, path string) (rgc.Predictor, error) {
	if m.StimMode != rgc.StimCausal {
		return nil, fmt.Errorf("GLM mixture: the GLM reads causal bins, but the model reads %s", m.StimMode)
	}
	tr, err := glm.LoadTruth(path)
	if err != nil {
		return nil, fmt.Errorf("GLM mixture: %w", err)
	}
	if missing := rollout.MissingCells(tr.ClusterIDs(), m.Cells); len(missing) > 0 {
		return nil, fmt.Errorf("GLM mixture: %s has no model of cells %v that the checkpoint serves", path, missing)
	}
	p, err := glm.NewWindowPredictor(tr)
	if err != nil {
		return nil, fmt.Errorf("GLM mixture %s: %w", path, err)
	}
	return p, nil
}
