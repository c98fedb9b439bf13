//go:build !linux

package rt

import (
	"context"
	"time"
)

// saved is empty where nothing can be applied.
type saved struct{}

// Apply applies nothing here: ErrUnsupported.
func Apply(s Settings) (*State, error) {
	if err := s.Check(); err != nil {
		return &State{}, err
	}
	return &State{}, ErrUnsupported
}

// Undo has nothing to revert here.
func (st *State) Undo() error { return nil }

// Probe is unavailable here: ErrUnsupported.
func Probe(ctx context.Context, interval, d time.Duration, priority int) (ProbeResult, error) {
	return ProbeResult{}, ErrUnsupported
}
