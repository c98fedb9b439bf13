package engine

import (
	"bytes"
	"unsafe"

	"rgcpred/rgc"
)

// Carrying block 0 over from a cell's previous window.
//
// A cell's windows overlap: the daemon and the rollout move a cell's window
// on by the bins its last decision covered (80 after "no spike", k+1 after a
// spike in bin k), so a new window is the previous one moved d bins on,
// with d new bins at its end. The stem (conv1, conv2) and block 0's
// convolutions and shortcut are local and translation-equivariant: an
// output position whose receptive field lies inside the overlap, away from
// both windows' zero padding, is the same function of the same inputs in
// both windows. Block 0's squeeze-excite pools over every position, so from
// its gate on everything changes; before it, block 0's h3 and shortcut rows
// at such positions can be carried over, as long as d is a multiple of the
// stem and block 0's strides (4), so that the positions line up. A window
// then computes only the positions near its two ends (38 of block 0's 256
// for d = 80 in the paper's CNN: the stem and block 0 are about half of its
// FLOPs, and this removes 85% of them).
//
// Exactness: a carried row is bit for bit the row the window would compute
// (each output row of a GEMM is the same sum in the same order whatever
// rows are computed with it), and a row is carried only when the engine has
// checked that the previous window's bins d.. equal the new window's
// 0..bins-d bit for bit and that both were computed in the same arithmetic.
// So Batch.Ends is only a hint for d: a wrong or missing end costs the
// carry-over, never a wrong output.

// span is the rows lo..hi of a layer.
type span struct{ lo, hi int }

// spans are the rows of a layer a window computes: up to two disjoint
// spans, in order.
type spans struct {
	s [2]span
	n int
}

// all is every row of a layer of n rows.
func all(n int) spans { return spans{s: [2]span{{0, n}}, n: 1} }

// total is the number of rows in the spans.
func (s *spans) total() int {
	t := 0
	for _, sp := range s.s[:s.n] {
		t += sp.hi - sp.lo
	}
	return t
}

// part returns the rows of span k that the spans' rows v0..v1 cover, the
// spans' rows being numbered in order through both; lo >= hi when none.
func (s *spans) part(k, v0, v1 int) (lo, hi int) {
	if k >= s.n {
		return 0, 0
	}
	off := 0
	for _, sp := range s.s[:k] {
		off += sp.hi - sp.lo
	}
	sp := s.s[k]
	return max(sp.lo, sp.lo+v0-off), min(sp.hi, sp.lo+v1-off)
}

// add appends the rows of sp to s, merging it with the last span where they
// touch or overlap (spans come in order).
func (s *spans) add(sp span) {
	if sp.hi <= sp.lo {
		return
	}
	if s.n > 0 && sp.lo <= s.s[s.n-1].hi {
		s.s[s.n-1].hi = max(s.s[s.n-1].hi, sp.hi)
		return
	}
	s.s[s.n] = sp
	s.n++
}

// rowPlan says which rows of the stem and of block 0 a window computes:
// all of them, or, when it carries block 0's rows over from its cell's
// previous window, those near its ends.
type rowPlan struct {
	c1, c2 spans // stem rows: conv1's and conv2's outputs
	h1     spans // block 0's conv1 rows
	out    spans // block 0's output positions (conv2, conv3, shortcut)
}

// conv geometry, for the spans a convolution's output depends on.

// carried returns the output positions of c (over lOut positions) whose
// inputs are all carried rows v, none of them padding.
func (c *conv) carried(v span, lOut int) span {
	lo := ceilDiv(v.lo+c.pad, c.stride)
	hi := floorDiv(v.hi-c.k+c.pad, c.stride) + 1
	return span{max(lo, 0), min(hi, lOut)}
}

// needs returns the input rows (of lIn) that output positions o read,
// padding left out.
func (c *conv) needs(o span, lIn int) span {
	if o.hi <= o.lo {
		return span{}
	}
	return span{max(0, o.lo*c.stride-c.pad), min(lIn, (o.hi-1)*c.stride-c.pad+c.k)}
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// reuseStride is the number of input bins per block 0 output position: a
// window can carry block 0 over only when it moved on by a multiple of it.
func (n *network) reuseStride() int {
	return n.conv1.stride * n.conv2.stride * n.blocks[0].stride
}

// rowPlans returns, for each shift u of block 0's positions (index u, from
// 1; index 0 computes all), the rows a window moved on by u*reuseStride()
// bins computes. Shifts beyond the table carry nothing over; so does every
// shift when block 0 has no shortcut convolution (its identity shortcut
// would have to be carried too): then the table is index 0 alone.
func (n *network) rowPlans() []rowPlan {
	b0 := &n.blocks[0]
	full := rowPlan{c1: all(n.stemLen), c2: all(n.stemLen), h1: all(b0.lIn), out: all(b0.lOut)}
	plans := []rowPlan{full}
	if b0.shortcut == nil || b0.conv2.pad > b0.conv2.k-1 {
		return plans
	}
	for u := 1; ; u++ {
		d := u * n.reuseStride()
		// Rows of each layer equal in both windows (new coordinates): the
		// input's bins 0..bins-d are the previous window's d..bins.
		in := span{0, n.bins - d}
		c1 := n.conv1.carried(in, n.stemLen)
		c2 := n.conv2.carried(c1, n.stemLen)
		h2 := b0.conv2.carried(c2, b0.lOut) // conv1 is 1x1: h1 rows = c2 rows
		sc := b0.shortcut.carried(c2, b0.lOut)
		keep := span{max(h2.lo, sc.lo), min(h2.hi, sc.hi)}
		if keep.hi <= keep.lo {
			return plans
		}
		var p rowPlan
		p.out.add(span{0, keep.lo})
		p.out.add(span{keep.hi, b0.lOut})
		for _, o := range p.out.s[:p.out.n] {
			// The shortcut (1x1, no padding) reads rows inside conv2's.
			p.h1.add(b0.conv2.needs(o, b0.lIn))
		}
		p.c2 = p.h1
		for _, r := range p.c2.s[:p.c2.n] {
			p.c1.add(n.conv2.needs(r, n.stemLen))
		}
		plans = append(plans, p)
	}
}

// keptPerCell is the number of windows whose rows the engine keeps per
// cell: one per stream the cell's windows come from (a daemon serving the
// same cells to two devices, say), the least recently used replaced.
const keptPerCell = 2

// cellRows is what the engine keeps of one of a cell's windows: the
// window, and block 0's h3 and shortcut rows, in a ring of lOut rows whose
// row base holds position 0.
type cellRows struct {
	win    []float32 // rgc.WindowLen
	end    int       // the window's Batch.Ends
	arith  Precision // the arithmetic h3 and sc were computed in
	base   int
	h3, sc []float32 // [lOut, out] each
	call   uint64    // the last call that used the rows (0: never)
}

// plan is how one window of a call runs its stem and block 0: the rows it
// computes, and the kept ring its block 0 rows go to (h3 nil: the
// window's own buffers). The ring's base is held by value: the next call's
// plan moves the cell's base while a helper late from this call may still
// walk (claiming nothing) through the window.
type plan struct {
	rows   *rowPlan
	h3, sc []float32
	base   int // the ring row of block 0 position 0
}

// plan decides how window (ending at bin end, on embedding row row) runs
// in call number call (counting from 1): it carries rows over from one of
// the cell's kept windows if the window is that one moved on, and keeps
// its own rows in place of that one, or of the least recently used. Each
// kept window serves one window per call; a window of a cell whose kept
// windows a call has used up computes everything and keeps nothing.
func (e *Engine) plan(window []float32, end, row int, call uint64) plan {
	full := plan{rows: &e.plans[0]}
	if e.cells == nil {
		return full
	}
	arith := e.Precision()
	s := e.net.reuseStride()
	var keep *cellRows
	u := 0
	kept := e.cells[row*keptPerCell : (row+1)*keptPerCell]
	for i := range kept {
		c := &kept[i]
		if c.call == call || c.call == 0 || c.arith != arith {
			continue
		}
		if d := end - c.end; d > 0 && d%s == 0 && d/s < len(e.plans) && sameShifted(window, c.win, d, e.net.bins) {
			keep, u = c, d/s
			break
		}
	}
	if keep == nil {
		for i := range kept {
			if c := &kept[i]; c.call != call && (keep == nil || c.call < keep.call) {
				keep = c
			}
		}
		if keep == nil {
			return full
		}
	}
	if u > 0 {
		keep.base = (keep.base + u) % e.net.blocks[0].lOut
		e.stats.reused.Add(1)
	}
	p := plan{rows: &e.plans[u], h3: keep.h3, sc: keep.sc, base: keep.base}
	copy(keep.win, window)
	keep.end, keep.arith, keep.call = end, arith, call
	return p
}

// sameShifted reports whether every row of window (rows of bins floats)
// from bin 0 equals the same row of prev from bin d, bit for bit.
func sameShifted(window, prev []float32, d, bins int) bool {
	for r := 0; r < len(window); r += bins {
		if !sameBits(window[r:r+bins-d], prev[r+d:r+bins]) {
			return false
		}
	}
	return true
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	ab := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a))
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b))
	return bytes.Equal(ab, bb)
}

// SetReuse turns carrying block 0's rows over from a cell's previous window
// on or off (on by default; see the package documentation). Outputs are the
// same either way. The rows kept take about 150 KB per kept window,
// keptPerCell per cell, allocated here (so that no call allocates: a
// daemon's first windows after a reload included); off frees them. Like
// Predict, it is not safe for concurrent use.
func (e *Engine) SetReuse(on bool) {
	if !on || len(e.plans) < 2 {
		e.cells = nil
		return
	}
	if e.cells != nil {
		return
	}
	b0 := &e.net.blocks[0]
	rows := b0.lOut * b0.out
	per := rgc.WindowLen + 2*rows
	e.cells = make([]cellRows, keptPerCell*e.cfg.NumCells)
	slab := make([]float32, per*len(e.cells))
	for i := range e.cells {
		m := slab[i*per : (i+1)*per : (i+1)*per]
		e.cells[i] = cellRows{win: m[:rgc.WindowLen], h3: m[rgc.WindowLen : rgc.WindowLen+rows], sc: m[rgc.WindowLen+rows:]}
	}
}
