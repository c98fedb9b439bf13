package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// SettleTimeout bounds the wait, after the replay, for the instances to
// settle before their states are compared.
const SettleTimeout = 20 * time.Second

// settlePoll is the pause between two polls of the instances' states.
const settlePoll = 500 * time.Millisecond

// stateHead is what the settle rule reads of a state answer
// (daemon.Snapshot as JSON).
type stateHead struct {
	Last     int64   `json:"last"`
	CandSeqs []int64 `json:"cand_seqs"`
}

// unsettled says why one poll's state answers cannot be compared yet (""
// when they can): every one of instances must be synced and answer, hold
// no candidate numbering, and have processed the device's last frame, or
// answer as at the previous poll (prev; its state stopped changing, as
// for a replica that missed the last frames). A state a replica is still
// catching up to, or one holding a candidate, would differ for that alone.
func unsettled(answers, prev [][]byte, instances, synced int, last int64) (string, error) {
	if synced < instances {
		return fmt.Sprintf("%d of %d instances synced", synced, instances), nil
	}
	if len(answers) < instances {
		return fmt.Sprintf("%d of %d instances answered", len(answers), instances), nil
	}
	stable := sameStates(answers, prev)
	for _, a := range answers {
		var h stateHead
		if err := json.Unmarshal(a, &h); err != nil {
			return "", fmt.Errorf("nemesis: state answer: %w", err)
		}
		if len(h.CandSeqs) > 0 {
			return fmt.Sprintf("an instance holds a candidate numbering (%d frames)", len(h.CandSeqs)), nil
		}
		if h.Last != last && !stable {
			return fmt.Sprintf("an instance is at frame %d of %d and still changing", h.Last, last), nil
		}
	}
	return "", nil
}

// sameStates reports whether two polls answered the same states, in any
// order (the answers do not name the instance).
func sameStates(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	x := make([]string, len(a))
	y := make([]string, len(b))
	for i := range a {
		x[i], y[i] = string(a[i]), string(b[i])
	}
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// settle waits until the instances settled (unsettled says ""), at most
// until deadline, and returns the last poll's states and why they did not
// settle ("" when they did). last is the device's last frame.
func (t *topology) settle(ctx context.Context, deadline time.Time, last int64) ([][]byte, string, error) {
	_ = t.waitRecovered(ctx, time.Until(deadline)) // a fault cut short by the replay's end heals first
	var prev [][]byte
	for {
		synced := 0
		for _, in := range t.instances {
			if in.Alive() && in.Synced() {
				synced++
			}
		}
		states, err := t.states(ctx)
		if err != nil {
			return nil, "", err
		}
		why, err := unsettled(states, prev, len(t.instances), synced, last)
		if err != nil || why == "" || ctx.Err() != nil || time.Now().After(deadline) {
			return states, why, err
		}
		prev = states
		sleep(ctx, settlePoll)
	}
}
