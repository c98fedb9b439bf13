package stream

// cellMark is the last window a fence's group handed on for one cell: the
// stream epoch (of the message's position) and the window's end.
type cellMark struct {
	epoch uint32
	end   int64
}

// order removes from d, a decisions message of group at pos about to be
// handed on, every decision whose window is not after the last one handed
// on for its cell (an older epoch, or the same epoch and an end at or
// before it), counting them (FenceStats.Late), and records the others. It
// reports whether a decision is left. A group without a mark (beyond
// MaxFenceGroups) passes.
func (f *Fence) order(group string, pos Pos, d *Decisions) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.marks[group]
	if m == nil {
		return len(d.Decisions) > 0
	}
	if m.cells == nil {
		m.cells = map[int32]cellMark{}
	}
	kept := d.Decisions[:0]
	for _, x := range d.Decisions {
		c, seen := m.cells[x.Cell]
		if seen && (pos.Epoch < c.epoch || pos.Epoch == c.epoch && x.End <= c.end) {
			f.stats.Late++
			continue
		}
		m.cells[x.Cell] = cellMark{epoch: pos.Epoch, end: x.End}
		kept = append(kept, x)
	}
	d.Decisions = kept
	return len(kept) > 0
}
