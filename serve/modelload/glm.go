package modelload

import (
	"fmt"
	"time"

	"rgcpred/model/engine"
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
		mix, err := rgc.NewMixture([]rgc.Predictor{m.Predictor, p}, []float64{1 - weight, weight})
		if err != nil {
			if m.Close != nil {
				_ = m.Close()
			}
			return nil, fmt.Errorf("GLM mixture: %w", err)
		}
		mixed := *m
		mixed.Predictor = &glmMixed{Mixture: mix, base: m.Predictor}
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

// glmMixed is the served mixture: the engine's counters (Stats) and the
// announcements of coming batches (Expect) reach the model under it.
type glmMixed struct {
	*rgc.Mixture
	base rgc.Predictor
}

// Stats returns the engine's counters (zero when the model has none).
func (g *glmMixed) Stats() engine.Stats {
	if s, ok := g.base.(interface{ Stats() engine.Stats }); ok {
		return s.Stats()
	}
	return engine.Stats{}
}

// Precision returns the arithmetic of the model under the mixture.
func (g *glmMixed) Precision() engine.Precision { return engine.PrecisionOf(g.base) }

// Arithmetic names the arithmetic of the model under the mixture, as the
// flight recorder stores it (engine.ArithmeticOf).
func (g *glmMixed) Arithmetic() string { return engine.ArithmeticOf(g.base) }

// Expect implements rgc.Expecter for the model under the mixture.
func (g *glmMixed) Expect(n int, d time.Duration) {
	if e, ok := g.base.(rgc.Expecter); ok {
		e.Expect(n, d)
	}
}
