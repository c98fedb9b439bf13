package service

import (
	"fmt"
	"math"

	"rgcpred/base/lowprio"
	"rgcpred/model"
	"rgcpred/rgc"
)

// loadValid loads the checkpoint and checks it can serve: it knows every
// cell in need (if any) and returns a valid distribution for a zero window.
func (s *Service) loadValid(need []int) (*Model, error) {
	mdl, err := s.cfg.Load(s.cfg.ModelPath, s.cfg.MaxBatch)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if mdl == nil || mdl.Predictor == nil || len(mdl.Cells) == 0 {
		discard(mdl)
		return nil, fmt.Errorf("load model %s: loader returned no predictor or no cells", s.cfg.ModelPath)
	}
	if err := checkTimeBase(mdl); err != nil {
		discard(mdl)
		return nil, fmt.Errorf("model %s: %w", s.cfg.ModelPath, err)
	}
	if err := rgc.CheckStimMode(mdl.StimMode, s.cfg.StimMode); err != nil {
		discard(mdl)
		return nil, fmt.Errorf("model %s: %w (the devices' frames, predictord --stim)", s.cfg.ModelPath, err)
	}
	if err := probe(mdl, need); err != nil {
		discard(mdl)
		return nil, fmt.Errorf("model %s: %w", s.cfg.ModelPath, err)
	}
	return mdl, nil
}

// discard releases a model that will not be used.
func discard(m *Model) {
	if m != nil && m.Close != nil {
		_ = m.Close()
	}
}

// checkTimeBase checks that the checkpoint was trained in the stream's time
// base: frames are bins at rgc.BinRateHz, a window is rgc.WindowBins bins
// and the horizon rgc.Horizon bins. A model of another bin rate would read
// every window stretched or squeezed in time and predict spike times off by
// the ratio, with no error anywhere else.
func checkTimeBase(mdl *Model) error {
	if r := mdl.BinRateHz; r != 0 && !(math.Abs(r-rgc.BinRateHz) <= 1e-9*rgc.BinRateHz) {
		return fmt.Errorf("checkpoint bin rate %.6f Hz differs from the stream's %.6f Hz (rgc.BinRateHz): trained on data of another "+
			"time base",
			r, rgc.BinRateHz)
	}
	if mdl.WindowBins != 0 && mdl.WindowBins != rgc.WindowBins {
		return fmt.Errorf("checkpoint window of %d bins differs from the daemon's %d", mdl.WindowBins, rgc.WindowBins)
	}
	if mdl.Horizon != 0 && mdl.Horizon != rgc.Horizon {
		return fmt.Errorf("checkpoint horizon of %d bins differs from the daemon's %d", mdl.Horizon, rgc.Horizon)
	}
	return nil
}

// probe checks that mdl knows every cell of need and returns a valid
// distribution for a zero window.
func probe(mdl *Model, need []int) error {
	set := make(map[int]bool, len(mdl.Cells))
	for _, c := range mdl.Cells {
		set[c] = true
	}
	for _, c := range need {
		if !set[c] {
			return fmt.Errorf("does not know served cell %d", c)
		}
	}
	cell := mdl.Cells[0]
	if len(need) > 0 {
		cell = need[0]
	}
	b := &rgc.Batch{Inputs: make([]float32, rgc.WindowLen), Cells: []int{cell}, Ends: []int{rgc.WindowBins - 1}}
	out := make([]float32, rgc.NumClasses)
	if err := mdl.Predictor.Predict(b, out); err != nil {
		return fmt.Errorf("probe prediction: %w", err)
	}
	if err := model.CheckDist(out); err != nil {
		return fmt.Errorf("probe prediction is not a distribution: %w", err)
	}
	return nil
}

// Reload loads the checkpoint again (SIGHUP). The new model is validated
// first: it must know every served cell and answer a probe window; on any
// failure the old model stays. Cell states are kept either way.
func (s *Service) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.standbyOn() {
		s.m.reloads.WithLabelValues("error").Inc()
		s.log.Error().Err(errStandbyReload).Msg("reload refused, keeping the model")
		return errStandbyReload
	}
	// Reading, packing and probing the new model must not take the cores
	// from live decisions.
	var mdl *Model
	var err error
	lowprio.Run(func() { mdl, err = s.loadValid(s.cells) })
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		s.log.Error().Err(err).Msg("reload failed, keeping the old model")
		return err
	}
	if mdl.MaxBatch > 0 && mdl.MaxBatch < s.maxBatch {
		discard(mdl)
		err := fmt.Errorf("reload %s: new model's max batch %d is below the serving batch %d", s.cfg.ModelPath, mdl.MaxBatch, s.maxBatch)
		s.m.reloads.WithLabelValues("error").Inc()
		s.log.Error().Err(err).Msg("reload failed, keeping the old model")
		return err
	}
	if err := s.pred.swap(mdl.Predictor); err != nil {
		discard(mdl)
		s.m.reloads.WithLabelValues("error").Inc()
		return fmt.Errorf("reload %s: %w", s.cfg.ModelPath, err)
	}
	old := s.engine.swap(func() *Model { return s.model.Swap(mdl) })
	if old != nil && old.Close != nil {
		if err := old.Close(); err != nil {
			s.log.Warn().Err(err).Msg("close the replaced model")
		}
	}
	s.m.reloads.WithLabelValues("ok").Inc()
	s.rec.due("") // the recording names the new model from here on
	s.log.Info().Str("model", mdl.Name).Str("path", s.cfg.ModelPath).Int("cells", len(s.cells)).Msg("model reloaded")
	return nil
}
