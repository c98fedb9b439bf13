package rollout

import (
	"errors"
	"fmt"
	"slices"

	"rgcpred/rgc"
)

// StartOffset is the staggered-start rule shared by the offline rollout
// (Options.Stagger), the daemon (predictord --stagger) and the replay
// client: of n cells, listed in ascending cluster id (a daemon's whole cell
// list, before sharding, so every shard agrees), cell i's first window ends
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
// It returns 0 for i outside 0..n-1 or n < 1. Callers that know cells by
// cluster id use StartOffsetsByID, callers that know their indices in the
// whole list (a shard's status) StartOffsets.
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

// StartOffsetsByID returns the start offset of each cell of cells (cluster
// ids, any order) under the rule of StartOffset: its index in all, the
// whole cell list in strictly ascending order, or, when all is nil, its
// rank among cells (which must then be distinct). Without stagger the
// offsets are all zero, but the lists are checked all the same. It fails
// when all is not strictly ascending or lacks a cell of cells.
func StartOffsetsByID(cells, all []int, stagger bool) ([]int, error) {
	if all == nil {
		all = slices.Sorted(slices.Values(cells))
	}
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			return nil, errors.New("the whole cell list is not strictly ascending")
		}
	}
	idx := make([]int, len(cells))
	for j, id := range cells {
		i, ok := slices.BinarySearch(all, id)
		if !ok {
			return nil, fmt.Errorf("cell %d is not in the whole cell list", id)
		}
		idx[j] = i
	}
	return StartOffsets(idx, len(all), stagger), nil
}
