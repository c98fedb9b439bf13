package daemon

import (
	"fmt"
	"slices"

	"rgcpred/rgc"
	"rgcpred/stream"
)

// Snapshot is a core's state between two frames: everything a core of the
// same configuration needs to take, from the next frame on, the decisions
// this one would take (stimulus ring, stream clock and epoch, every cell's
// next window and spike history, pending histories, a candidate numbering).
// A hot standby that joins a running stream restores the holder's snapshot
// and feeds it the frames that followed. A wait for resent frames
// (Receive) is not part of it: the frames held meanwhile were received,
// not processed, like frames still queued; they depend on which frames
// this instance missed, and the wait lasts Config.ResendWait at most.
// Restore forgets such a wait.
type Snapshot struct {
	Cells   []int  `json:"cells"`
	Started bool   `json:"started"`
	Epoch   uint32 `json:"epoch"`
	Reason  uint8  `json:"reason"`
	First   int64  `json:"first"`
	Last    int64  `json:"last"`
	Prev    int64  `json:"prev"`
	Filled  int64  `json:"filled"`
	Held    [rgc.StimChannels]float32
	HeldT   int64 `json:"held_t"`
	// Stim is the stimulus ring, channel by channel, indexed by bin mod
	// 2 * rgc.WindowBins (a window, and the bins of windows that may come
	// due late, Config.Gather); Times and FilledAt hold each of its bins'
	// frame time and the last gap-filled bin as of that bin.
	Stim     [rgc.StimChannels][]float32 `json:"stim"`
	Times    []int64                     `json:"times"`
	FilledAt []int64                     `json:"filled_at"`
	// Next and Spikes are each served cell's next window end and the bins
	// of its history (ending at Next) that hold a spike.
	Next   []int64   `json:"next"`
	Spikes [][]int64 `json:"spikes"`
	// Pending holds the histories waiting for the next stream start, by
	// cell index (nil: none).
	Pending [][]bool `json:"pending"`
	// ResetAt is the frame before which a reset of the current stream
	// applies (Core.PendingReset; nil: none).
	ResetAt *int64 `json:"reset_at,omitempty"`
	// Candidate holds the frames of a numbering not yet adopted.
	CandSeqs   []int64        `json:"cand_seqs"`
	CandFrames []stream.Frame `json:"cand_frames"`
}

// Snapshot returns the core's state. It allocates; call it between frames
// from the goroutine feeding the core. Gathered windows are decided first
// (Flush), so the snapshot holds no window half-way.
func (c *Core) Snapshot() *Snapshot {
	c.Flush()
	s := &Snapshot{
		Cells: slices.Clone(c.cfg.Cells), Started: c.started, Epoch: c.epoch, Reason: c.reason,
		First: c.first, Last: c.last, Prev: c.prev, Filled: c.filled, Held: c.held, HeldT: c.heldT,
		Next: make([]int64, len(c.cells)), Spikes: make([][]int64, len(c.cells)), Pending: make([][]bool, len(c.cells)),
		CandSeqs: slices.Clone(c.cand.seqs[:c.cand.n]), CandFrames: slices.Clone(c.cand.frames[:c.cand.n]),
	}
	for ch := range c.stim {
		s.Stim[ch] = slices.Clone(c.stim[ch][:])
	}
	s.Times, s.FilledAt = slices.Clone(c.times[:]), slices.Clone(c.filledAt[:])
	if at, ok := c.PendingReset(); ok {
		s.ResetAt = &at
	}
	row := make([]float32, rgc.WindowBins)
	for i := range c.cells {
		cell := &c.cells[i]
		s.Next[i] = int64(cell.Next)
		cell.History.FillRow(row)
		end := int64(cell.History.End())
		for j, v := range row {
			if v != 0 {
				s.Spikes[i] = append(s.Spikes[i], end-(rgc.WindowBins-1)+int64(j))
			}
		}
		if c.pending[i].has {
			s.Pending[i] = slices.Clone(c.pending[i].spikes[:])
		}
	}
	return s
}

// Restore replaces the core's state by s, a snapshot of a core serving the
// same cells in the same order. Statistics are kept, and so are the
// wall-time rule's dates: they follow this instance's own arrival times,
// which no snapshot holds, so replicas that saw the same frames have equal
// snapshots.
func (c *Core) Restore(s *Snapshot) error {
	switch {
	case !slices.Equal(s.Cells, c.cfg.Cells):
		return fmt.Errorf("daemon: restore: snapshot of cells %v, this core serves %v", s.Cells, c.cfg.Cells)
	case len(s.Next) != len(c.cells) || len(s.Spikes) != len(c.cells) || len(s.Pending) != len(c.cells):
		return fmt.Errorf("daemon: restore: snapshot of %d cells' states, want %d", len(s.Next), len(c.cells))
	case len(s.CandSeqs) != len(s.CandFrames) || len(s.CandSeqs) > c.cfg.ConfirmFrames:
		return fmt.Errorf("daemon: restore: candidate of %d frames (confirm after %d)", len(s.CandSeqs), c.cfg.ConfirmFrames)
	}
	for ch := range s.Stim {
		if len(s.Stim[ch]) != ringBins {
			return fmt.Errorf("daemon: restore: stimulus channel %d of %d bins, want %d", ch, len(s.Stim[ch]), ringBins)
		}
	}
	if len(s.Times) != ringBins || len(s.FilledAt) != ringBins {
		return fmt.Errorf("daemon: restore: %d frame times and %d filled marks, want %d", len(s.Times), len(s.FilledAt), ringBins)
	}
	if s.ResetAt != nil && (!s.Started || *s.ResetAt <= s.Last || *s.ResetAt > stream.MaxSeq) {
		return fmt.Errorf("daemon: restore: a reset pending at seq %d, the stream at %d (started %v)", *s.ResetAt, s.Last, s.Started)
	}
	for i, p := range s.Pending {
		if p != nil && len(p) != rgc.WindowBins {
			return fmt.Errorf("daemon: restore: pending history of cell %d of %d bins", c.cfg.Cells[i], len(p))
		}
	}
	c.started, c.epoch, c.reason = s.Started, s.Epoch, s.Reason
	c.first, c.last, c.prev, c.filled, c.held, c.heldT = s.First, s.Last, s.Prev, s.Filled, s.Held, s.HeldT
	for ch := range c.stim {
		copy(c.stim[ch][:], s.Stim[ch])
	}
	copy(c.times[:], s.Times)
	copy(c.filledAt[:], s.FilledAt)
	c.gath, c.winEnd = c.gath[:0], -1
	for i := range c.cells {
		c.cells[i].Reset(c.cfg.Cells[i], int(s.Next[i]), nil)
		for _, b := range s.Spikes[i] {
			c.cells[i].History.Mark(int(b))
		}
		c.pending[i].has = s.Pending[i] != nil
		if c.pending[i].has {
			copy(c.pending[i].spikes[:], s.Pending[i])
		}
	}
	c.resetAt = -1
	if s.ResetAt != nil {
		c.resetAt = *s.ResetAt
	}
	c.cand.n = copy(c.cand.seqs, s.CandSeqs)
	copy(c.cand.frames, s.CandFrames)
	c.nextDue = 0
	c.gw.drop()
	return nil
}
