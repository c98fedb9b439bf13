package modelload

import (
	"fmt"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/serve/service"
)

// Oracle serves the exact oracle of the synthetic recording in dir
// (rgc/synth) as a model, binned in stimulus mode mode, for every cell of
// the recording the oracle knows. The daemon passes each window's end bin
// as the frame sequence number, which a replay of the recording makes the
// recording bin, so the oracle sees the bins it expects.
func Oracle(dir string, mode rgc.StimMode) (*service.Model, error) {
	o, err := synth.OracleFromDir(dir)
	if err != nil {
		return nil, err
	}
	o.SetStimMode(mode)
	rec, err := rgc.Load(dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, id := range rec.ClusterIDs() {
		if _, ok := o.CellIndex(id); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("oracle of %s knows none of its cells", dir)
	}
	return &service.Model{Predictor: &probedOracle{o: o}, Cells: ids, Name: "synthetic oracle", StimMode: mode}, nil
}

// probedOracle lets the oracle pass the service's load probe, which
// predicts one window with no stimulus at all (every LED row zero); the
// oracle refuses any window whose stimulus is not its recording's at the
// window's end bin. A lone window whose four LED rows are all zero, which a
// synthetic recording's stimulus never produces over a window, gets the
// "no spike" class with certainty; every other window goes to the oracle
// unchanged, including its stimulus check.
type probedOracle struct{ o *synth.Oracle }

// Predict implements rgc.Predictor.
func (p *probedOracle) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		w := b.Inputs[i*rgc.WindowLen : i*rgc.WindowLen+rgc.SpikeRow*rgc.WindowBins]
		if !allZero(w) {
			continue
		}
		if b.Len() != 1 {
			return fmt.Errorf("oracle: window %d of %d has no stimulus", i, b.Len())
		}
		o := out[:rgc.NumClasses]
		clear(o)
		o[rgc.NoSpikeClass] = 1
		return nil
	}
	return p.o.Predict(b, out)
}

// allZero reports whether every value of x is zero.
func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}
