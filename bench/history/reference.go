package history

import (
	"context"
	"fmt"

	"rgcpred/rgc"
	"rgcpred/rollout"
)

// Rollout runs the undisturbed offline rollout of opts (rollout.Run, what
// `trainer eval` runs, keeping every choice) and returns its reference and
// the rollout's result.
func Rollout(ctx context.Context, rec *rgc.Recording, p rgc.Predictor, opts rollout.Options) (*Reference, *rollout.Result, error) {
	opts.KeepChoices = true
	res, err := rollout.Run(ctx, rec, p, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("history: reference: %w", err)
	}
	ref, err := NewReference(res)
	if err != nil {
		return nil, nil, err
	}
	return ref, res, nil
}

// SameStarts fails unless the reference started every cell where the
// device did: cells[i] first decided the window ending at starts[i].
func (r *Reference) SameStarts(cells, starts []int) error {
	for i, id := range cells {
		ws, ok := r.cells[int32(id)]
		if !ok {
			return fmt.Errorf("history: cell %d is not in the reference", id)
		}
		if len(ws) > 0 && ws[0].End != int64(starts[i]) {
			return fmt.Errorf("history: cell %d starts at window %d on the device and %d in the reference: the start rules differ", id, starts[i], ws[0].End)
		}
	}
	return nil
}
