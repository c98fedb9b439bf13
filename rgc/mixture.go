package rgc

import (
	"errors"
	"fmt"
	"math"
)

var _ Predictor = (*Mixture)(nil)

// Mixture is a predictor whose class probabilities are a weighted average
// of its members' (an ensemble in probability space):
//
//	p(k) = sum_i w_i p_i(k),  w_i > 0, sum_i w_i = 1.
//
// A mixture of proper distributions is a proper distribution, and its
// log loss is at most the weighted mean of the members' (Jensen), so
// averaging models that err differently lowers the NLL. It is how
// independently trained seeds are ensembled, and how a network is mixed
// with the GLM. Not safe for concurrent use (members need not be).
type Mixture struct {
	members []Predictor
	weights []float64
	buf     []float32 // one member's output
}

// NewMixture returns the mixture of members with weights proportional to
// weights (positive and finite; they are normalised to sum to 1).
func NewMixture(members []Predictor, weights []float64) (*Mixture, error) {
	if len(members) == 0 {
		return nil, errors.New("mixture: no members")
	}
	if len(weights) != len(members) {
		return nil, fmt.Errorf("mixture: %d weights for %d members", len(weights), len(members))
	}
	sum := 0.0
	for i, w := range weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("mixture: member %d has weight %v, want a positive finite number", i, w)
		}
		sum += w
	}
	m := &Mixture{members: members, weights: make([]float64, len(weights))}
	for i, w := range weights {
		m.weights[i] = w / sum
	}
	return m, nil
}

// Weights returns the normalised weights, one per member.
func (m *Mixture) Weights() []float64 { return append([]float64(nil), m.weights...) }

// Predict implements Predictor: each member predicts the whole batch, and
// out receives the weighted sum of their probabilities.
func (m *Mixture) Predict(b *Batch, out []float32) error {
	if err := b.Check(); err != nil {
		return fmt.Errorf("mixture: %w", err)
	}
	n := b.Len() * NumClasses
	if len(out) < n {
		return fmt.Errorf("mixture: output has %d floats for %d windows, want %d", len(out), b.Len(), n)
	}
	if cap(m.buf) < n {
		m.buf = make([]float32, n)
	}
	buf := m.buf[:n]
	for i, p := range m.members {
		if err := p.Predict(b, buf); err != nil {
			return fmt.Errorf("mixture member %d: %w", i, err)
		}
		w := float32(m.weights[i])
		if i == 0 {
			for j, v := range buf {
				out[j] = w * v
			}
			continue
		}
		for j, v := range buf {
			out[j] += w * v
		}
	}
	return nil
}
