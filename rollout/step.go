// Package rollout runs spike predictors autoregressively, as a prosthesis
// would (docs/model.md section 4), and scores the generated spike
// trains against recorded ones (section 5).
package rollout

import "rgcpred/rgc"

// Step is the autoregressive stepping rule shared by the offline rollout and
// the daemon. Given the window ending at bin t and the median class k of the
// predicted distribution, it returns the end bin of the next window and
// whether that bin holds a predicted spike: for k < rgc.Horizon the generated
// train gets k zeros and then a spike, so the next window ends at the spike,
// t+k+1; for k = rgc.NoSpikeClass it gets rgc.Horizon zeros and the next
// window ends at t+rgc.Horizon with no spike.
func Step(t, k int) (next int, spike bool) {
	if k >= 0 && k < rgc.Horizon {
		return t + k + 1, true
	}
	return t + rgc.Horizon, false
}
