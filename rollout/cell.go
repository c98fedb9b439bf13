package rollout

import (
	"iter"
	"math"
	"slices"

	"rgcpred/rgc"
)

// Cell is the autoregressive state of one cell, shared by the offline
// rollout and the daemon: the end bin of the window to predict next and the
// spike history the cell itself generated. Both advance only through Step.
//
// Use: when the stream reaches bin Next (Due), fill the window ending at Next
// with the stimulus and History.FillRow, predict, and call Advance with the
// median class.
type Cell struct {
	// ID is the cell's cluster id.
	ID int
	// Next is the end bin of the next window to predict.
	Next int
	// History holds the generated spikes of the last rgc.WindowBins bins up
	// to Next.
	History History
}

// Reset starts the cell at window end t with the recorded spike history of
// spikeBins (ascending): the bins of HistoryBins(spikeBins, t-1023, t) are
// marked, e.g. the recorded spikes of the first window of an offline
// rollout, or none (nil). It is ResetRow of HistoryRow(spikeBins, t).
func (c *Cell) Reset(id, t int, spikeBins []int32) {
	c.ID = id
	c.Next = t
	c.History.Reset(t)
	for b := range HistoryBins(spikeBins, t-(rgc.WindowBins-1), t) {
		c.History.Mark(b)
	}
}

// ResetRow starts the cell at window end t with the history row (the
// layout of HistoryRow: row[j] is bin t-1023+j), as a daemon receives it
// from a client.
func (c *Cell) ResetRow(id, t int, row *[rgc.WindowBins]bool) {
	c.ID = id
	c.Next = t
	c.History.Reset(t)
	for j, s := range row {
		if s {
			c.History.Mark(t - (rgc.WindowBins - 1) + j)
		}
	}
}

// HistoryRow writes the spike history a cell starts with when its first
// window ends at bin t: row[j] is true when spikeBins (ascending) holds bin
// t-1023+j. A client sends it to the daemon (stream.History.Spikes), which
// starts the cell with ResetRow; the offline rollout's Reset marks the same
// bins.
func HistoryRow(row *[rgc.WindowBins]bool, spikeBins []int32, t int) {
	clear(row[:])
	lo := t - (rgc.WindowBins - 1)
	for b := range HistoryBins(spikeBins, lo, t) {
		row[b-lo] = true
	}
}

// HistoryBins yields, once each and ascending, the bins of spikeBins
// (ascending, possibly repeated) that lie in lo..hi. It is how every caller
// reads recorded spikes into a cell's history: the first window's spike
// row, and the bins between the unstaggered and the staggered first window
// end, which a rollout's generated train takes from the recording.
func HistoryBins(spikeBins []int32, lo, hi int) iter.Seq[int] {
	return func(yield func(int) bool) {
		i, _ := slices.BinarySearch(spikeBins, int32(min(max(lo, math.MinInt32), math.MaxInt32)))
		prev := lo - 1
		for ; i < len(spikeBins) && int(spikeBins[i]) <= hi; i++ {
			if b := int(spikeBins[i]); b != prev {
				prev = b
				if !yield(b) {
					return
				}
			}
		}
	}
}

// MissingCells returns the cells of want (cluster ids) that known (a
// predictor's cells, e.g. a checkpoint's) lacks, in the order of want; nil
// when it knows them all. It is the one check that a model knows the cells
// it is asked to predict.
func MissingCells(known, want []int) []int {
	set := make(map[int]bool, len(known))
	for _, id := range known {
		set[id] = true
	}
	var missing []int
	for _, id := range want {
		if !set[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// Due reports whether the window ending at bin t should be predicted: t has
// reached Next. A caller that skipped bins predicts at Next's window as soon
// as it sees a later t.
func (c *Cell) Due(t int) bool { return t >= c.Next }

// Advance applies the median class k of the prediction for the window ending
// at Next (Step): the history moves to the new Next with zeros and, when the
// step ends in a spike, a spike at the new Next. It returns the new Next and
// whether it holds a spike.
func (c *Cell) Advance(k int) (bin int, spike bool) {
	next, spike := Step(c.Next, k)
	c.History.AdvanceTo(next)
	if spike {
		c.History.Mark(next)
	}
	c.Next = next
	return next, spike
}

// History is a ring buffer of the last rgc.WindowBins bins of a generated
// spike train (1 spike, 0 none), ending at bin End. The zero value ends at
// bin 0 with no spikes.
type History struct {
	ring [rgc.WindowBins]float32
	end  int
}

// Reset empties the history and makes it end at bin t.
func (h *History) Reset(t int) {
	clear(h.ring[:])
	h.end = t
}

// End returns the last bin the history covers.
func (h *History) End() int { return h.end }

// slot returns the ring index of bin b.
func slot(b int) int {
	s := b % rgc.WindowBins
	if s < 0 {
		s += rgc.WindowBins
	}
	return s
}

// AdvanceTo moves the end to bin t (t >= End), the new bins holding no
// spike. An earlier t is ignored.
func (h *History) AdvanceTo(t int) {
	if t <= h.end {
		return
	}
	if t-h.end >= rgc.WindowBins {
		clear(h.ring[:])
	} else {
		for b := h.end + 1; b <= t; b++ {
			h.ring[slot(b)] = 0
		}
	}
	h.end = t
}

// Mark records a spike at bin b; bins outside End-1023..End are ignored.
func (h *History) Mark(b int) {
	if b > h.end || b <= h.end-rgc.WindowBins {
		return
	}
	h.ring[slot(b)] = 1
}

// FillRow writes the spike history of bins End-1023..End, oldest first, to
// row (rgc.WindowBins floats), e.g. the spike row of a window.
func (h *History) FillRow(row []float32) {
	s := slot(h.end + 1) // slot of the oldest bin, End-1023
	n := copy(row[:rgc.WindowBins], h.ring[s:])
	copy(row[n:rgc.WindowBins], h.ring[:s])
}
