package rollout

import "rgcpred/rgc"

// StartOffset is the staggered-start rule shared by the offline rollout
// (Options.Stagger) and the daemon (predictord --stagger): of n cells,
// listed in ascending cluster id (a daemon's whole cell list, before
// sharding, so every shard agrees), cell i's first window ends
// StartOffset(i, n) = floor(i * rgc.Horizon / n) bins after the
// unstaggered first window end (first = from + 1023), i.e. at
// first + StartOffset(i, n); the offsets lie in 0..rgc.Horizon-1.
//
// Why: a model that mostly predicts "no spike in 80 bins" steps every cell
// by exactly rgc.Horizon bins, so cells that start together stay in
// lockstep and all fall due at the same frame (one huge model call every
// 80 frames). Spreading the starts over one horizon spreads the load to
// about n/80 windows per frame; a cell's own spikes only ever move its
// phase, never back into lockstep by construction.
//
// It returns 0 for i outside 0..n-1 or n < 1.
func StartOffset(i, n int) int {
	if n < 1 || i < 0 || i >= n {
		return 0
	}
	return i * rgc.Horizon / n
}

// StartOffsets returns StartOffset(i, n) for the cells at indices idx of a
// list of n cells, or all zeros when stagger is false.
func StartOffsets(idx []int, n int, stagger bool) []int {
	out := make([]int, len(idx))
	if stagger {
		for j, i := range idx {
			out[j] = StartOffset(i, n)
		}
	}
	return out
}
