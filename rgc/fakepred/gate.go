package fakepred

import (
	"sync"
	"sync/atomic"

	"rgcpred/rgc"
)

// Gate wraps a predictor so that tests can hold a model call: once Armed,
// the next Predict closes Entered and every armed call waits until Release
// is closed.
type Gate struct {
	P       rgc.Predictor
	Armed   atomic.Bool
	Entered chan struct{}
	Release chan struct{}
	once    sync.Once
}

// NewGate returns an unarmed gate around p.
func NewGate(p rgc.Predictor) *Gate {
	return &Gate{P: p, Entered: make(chan struct{}), Release: make(chan struct{})}
}

// Predict implements rgc.Predictor.
func (g *Gate) Predict(b *rgc.Batch, out []float32) error {
	if g.Armed.Load() {
		g.once.Do(func() { close(g.Entered) })
		<-g.Release
	}
	return g.P.Predict(b, out)
}
