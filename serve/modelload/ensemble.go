package modelload

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"rgcpred/model/engine"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/serve/service"
)

// Ensemble returns a loader that serves, with equal weights, the mixture
// (rgc.Mixture) of the checkpoint at the path it is given and the
// checkpoints at others, each loaded by load: an ensemble of
// independently trained seeds, whose averaged probabilities score a lower
// NLL than any one of them (docs/training.md). Every member must know the
// first one's cells and read the same stimulus mode, bin rate, window and
// horizon. The members run one after another on the engine's threads; the
// first member's counters and arithmetic describe the model, the coming
// batches are announced to every member, and decisions are published when
// the whole call ends. On reload every file is read again.
func Ensemble(load service.Loader, others []string) service.Loader {
	return func(path string, maxBatch int) (*service.Model, error) {
		if len(others) == 0 {
			return nil, errors.New("ensemble: no checkpoint besides the model")
		}
		var members []*service.Model
		closeAll := func() error {
			var errs []error
			for _, m := range members {
				if m.Close != nil {
					errs = append(errs, m.Close())
				}
			}
			return errors.Join(errs...)
		}
		for _, p := range append([]string{path}, others...) {
			m, err := load(p, maxBatch)
			if err != nil {
				_ = closeAll()
				return nil, fmt.Errorf("ensemble: %w", err)
			}
			members = append(members, m)
			if err := sameFooting(members[0], m, p); err != nil {
				_ = closeAll()
				return nil, err
			}
		}
		preds := make([]rgc.Predictor, len(members))
		weights := make([]float64, len(members))
		names := make([]string, len(members))
		first := *members[0]
		for i, m := range members {
			preds[i], weights[i], names[i] = m.Predictor, 1, m.Name
			if m.MaxBatch > 0 && (first.MaxBatch == 0 || m.MaxBatch < first.MaxBatch) {
				first.MaxBatch = m.MaxBatch
			}
		}
		mix, err := rgc.NewMixture(preds, weights)
		if err != nil {
			_ = closeAll()
			return nil, fmt.Errorf("ensemble: %w", err)
		}
		first.Predictor = &mixServed{Mixture: mix, members: preds}
		first.Name = fmt.Sprintf("ensemble of %d, probabilities averaged: %s", len(members), strings.Join(names, "; "))
		first.Close = closeAll
		return &first, nil
	}
}

// sameFooting checks that member m (loaded from path) can be averaged with
// the first member: it knows the first's cells and reads the same input.
func sameFooting(first, m *service.Model, path string) error {
	if missing := rollout.MissingCells(m.Cells, first.Cells); len(missing) > 0 {
		return fmt.Errorf("ensemble: %s does not know cells %v of the first model", path, missing)
	}
	switch {
	case m.StimMode != first.StimMode:
		return fmt.Errorf("ensemble: %s reads %s bins, the first model %s", path, m.StimMode, first.StimMode)
	case m.BinRateHz != first.BinRateHz || m.WindowBins != first.WindowBins || m.Horizon != first.Horizon:
		return fmt.Errorf("ensemble: %s has bin rate %v Hz, window %d, horizon %d; the first model %v Hz, %d, %d",
			path, m.BinRateHz, m.WindowBins, m.Horizon, first.BinRateHz, first.WindowBins, first.Horizon)
	}
	return nil
}

// mixServed is a mixture as predictord serves it: the first member's engine
// counters and arithmetic describe it, and every member that can prepare
// for a coming batch (rgc.Expecter) hears of it.
type mixServed struct {
	*rgc.Mixture
	members []rgc.Predictor
}

// Stats returns the first member's engine counters (zero when it has none).
func (s *mixServed) Stats() engine.Stats {
	if st, ok := s.members[0].(interface{ Stats() engine.Stats }); ok {
		return st.Stats()
	}
	return engine.Stats{}
}

// Precision returns the first member's arithmetic.
func (s *mixServed) Precision() engine.Precision { return engine.PrecisionOf(s.members[0]) }

// Arithmetic names the first member's arithmetic (engine.ArithmeticOf).
func (s *mixServed) Arithmetic() string { return engine.ArithmeticOf(s.members[0]) }

// Expect implements rgc.Expecter: every member that prepares for batches
// is told of this one.
func (s *mixServed) Expect(n int, d time.Duration) {
	for _, m := range s.members {
		if x, ok := m.(rgc.Expecter); ok {
			x.Expect(n, d)
		}
	}
}
