package rollout

import "rgcpred/rgc"

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

// Reset starts the cell at window end t with the given spike history: the
// bins of spikeBins (ascending) within t-1023..t are marked, e.g. the
// recorded spikes of the first window of an offline rollout, or none.
func (c *Cell) Reset(id, t int, spikeBins []int32) {
	c.ID = id
	c.Next = t
	c.History.Reset(t)
	lo := t - (rgc.WindowBins - 1)
	for _, b := range spikeBins {
		if int(b) >= lo && int(b) <= t {
			c.History.Mark(int(b))
		}
	}
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
