package rgc

import (
	"fmt"
	"iter"
	"math/rand/v2"
)

// Split is one of the three contiguous stretches of a recording's time axis.
type Split int

// The splits, in time order: the first 70% of the bins train, the next 20%
// validate, the last 10% test.
const (
	Train Split = iota
	Val
	Test
)

// String returns "train", "val" or "test".
func (s Split) String() string {
	switch s {
	case Train:
		return "train"
	case Val:
		return "val"
	case Test:
		return "test"
	}
	return fmt.Sprintf("Split(%d)", int(s))
}

// ParseSplit parses "train", "val" or "test".
func ParseSplit(s string) (Split, error) {
	switch s {
	case "train":
		return Train, nil
	case "val":
		return Val, nil
	case "test":
		return Test, nil
	}
	return 0, fmt.Errorf("unknown split %q (want train, val or test)", s)
}

// SplitRange returns the bins [from, to) of split s: contiguous stretches in
// the ratio 7 : 2 : 1 (train, val, test) in that time order. An unknown
// split gives an empty range.
func (r *Recording) SplitRange(s Split) (from, to int) {
	a := r.Bins * 7 / 10
	b := r.Bins * 9 / 10
	switch s {
	case Train:
		return 0, a
	case Val:
		return a, b
	case Test:
		return b, r.Bins
	}
	return 0, 0
}

// WindowRange returns the window ends t that are valid in split s: the
// window t-1023..t and the target bins t+1..t+Horizon all lie inside the
// split, i.e. t-(WindowBins-1) >= from and t+Horizon < to. The valid ends are
// first..last inclusive; n is their number (0, with first > last, when the
// split is too short).
func (r *Recording) WindowRange(s Split) (first, last, n int) {
	from, to := r.SplitRange(s)
	first = from + WindowBins - 1
	last = to - Horizon - 1
	n = last - first + 1
	if n < 0 {
		n = 0
	}
	return first, last, n
}

// Target returns the class of the next spike after bin t: k < Horizon when
// the first spike after t falls in bin t+1+k, NoSpikeClass when there is no
// spike in bins t+1..t+Horizon. spikeBins is ascending.
func Target(spikeBins []int32, t int) int {
	i := firstAtLeast(spikeBins, t+1)
	if i == len(spikeBins) {
		return NoSpikeClass
	}
	k := int(spikeBins[i]) - t - 1
	if k >= Horizon {
		return NoSpikeClass
	}
	return k
}

// StimulusWindow fills rows 0..StimChannels-1 of the window dst (at least
// WindowLen floats, layout as on WindowLen) with the stimulus of bins
// t-1023..t; bins outside the recording read as 0 (LEDs off).
func (r *Recording) StimulusWindow(t int, dst []float32) {
	start := t - (WindowBins - 1)
	for c := 0; c < StimChannels; c++ {
		row := dst[c*WindowBins : (c+1)*WindowBins]
		src := r.Stimulus[c]
		lo, hi := start, t+1
		if lo < 0 {
			lo = 0
		}
		if hi > len(src) {
			hi = len(src)
		}
		if lo >= hi {
			clear(row)
			continue
		}
		clear(row[:lo-start])
		n := copy(row[lo-start:], src[lo:hi])
		clear(row[lo-start+n:])
	}
}

// FillSpikeRow writes the spike history of bins t-1023..t: 1 where at least
// one spike fell in the bin (clamped, two spikes still give 1), else 0.
// spikeBins is ascending. If dst has at least WindowLen floats it is a whole
// window and row SpikeRow is filled; otherwise dst must be exactly one row
// (WindowBins floats) and is filled itself.
func FillSpikeRow(dst []float32, spikeBins []int32, t int) {
	row := dst
	if len(dst) >= WindowLen {
		row = dst[SpikeRow*WindowBins : (SpikeRow+1)*WindowBins]
	} else if len(dst) != WindowBins {
		panic(fmt.Sprintf("rgc.FillSpikeRow: dst has %d floats, want %d (one row) or at least %d (a window)", len(dst), WindowBins, WindowLen))
	}
	clear(row)
	start := t - (WindowBins - 1)
	for i := firstAtLeast(spikeBins, start); i < len(spikeBins) && int(spikeBins[i]) <= t; i++ {
		row[int(spikeBins[i])-start] = 1
	}
}

// Window fills dst (at least WindowLen floats) with the input window ending
// at bin t for cell (an index into r.Cells) and returns its target class.
// It allocates nothing.
func (r *Recording) Window(cell, t int, dst []float32) (target int) {
	r.StimulusWindow(t, dst)
	sb := r.Cells[cell].SpikeBins
	FillSpikeRow(dst, sb, t)
	return Target(sb, t)
}

// WindowRef names one window: a cell (index into Recording.Cells) and the
// bin t the window ends at.
type WindowRef struct {
	// Cell indexes Recording.Cells; T is the window's end bin.
	Cell, T int
}

// NumWindows returns the number of valid windows of split s for the given
// cells (indices into r.Cells).
func (r *Recording) NumWindows(s Split, cells []int) int {
	_, _, n := r.WindowRange(s)
	return n * len(cells)
}

// AllWindows iterates over the valid windows of split s for the given cells
// (indices into r.Cells), cell by cell in the order given, t ascending,
// without materialising them.
func (r *Recording) AllWindows(s Split, cells []int) iter.Seq[WindowRef] {
	first, last, _ := r.WindowRange(s)
	return func(yield func(WindowRef) bool) {
		for _, c := range cells {
			for t := first; t <= last; t++ {
				if !yield(WindowRef{Cell: c, T: t}) {
					return
				}
			}
		}
	}
}

// Windows returns the valid windows of split s for the given cells (indices
// into r.Cells), in the order of AllWindows. For every training window of
// many cells prefer AllWindows or a Sampler, which do not materialise the
// list.
func (r *Recording) Windows(s Split, cells []int) []WindowRef {
	out := make([]WindowRef, 0, r.NumWindows(s, cells))
	for w := range r.AllWindows(s, cells) {
		out = append(out, w)
	}
	return out
}

// Sampler draws windows of one split uniformly at random (with replacement)
// from all valid windows of a set of cells, reproducibly from a seed.
type Sampler struct {
	cells  []int
	first  int
	perCel int
	rng    *rand.Rand
}

// NewSampler returns a sampler over the valid windows of split s of the
// given cells (indices into r.Cells), seeded with seed: the same seed gives
// the same sequence.
func NewSampler(r *Recording, s Split, cells []int, seed uint64) *Sampler {
	first, _, n := r.WindowRange(s)
	return &Sampler{
		cells:  append([]int(nil), cells...),
		first:  first,
		perCel: n,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Len returns the number of windows the sampler draws from.
func (s *Sampler) Len() int { return s.perCel * len(s.cells) }

// Next returns a uniformly drawn window; every valid window of every cell is
// equally likely. With no valid windows (Len() == 0) it returns
// WindowRef{Cell: -1, T: -1}.
func (s *Sampler) Next() WindowRef {
	n := s.Len()
	if n == 0 {
		return WindowRef{Cell: -1, T: -1}
	}
	i := s.rng.IntN(n)
	return WindowRef{Cell: s.cells[i/s.perCel], T: s.first + i%s.perCel}
}

// FillBatch fills b in place with the windows refs: Inputs (resized to
// len(refs)*WindowLen, reusing its capacity), Cells (cluster ids) and Ends
// (the window ends t). If targets is not nil it must have len(refs) entries
// and receives each window's target class. It allocates nothing once b's
// slices have the capacity.
func (r *Recording) FillBatch(refs []WindowRef, b *Batch, targets []int) {
	n := len(refs)
	b.Inputs = grow(b.Inputs, n*WindowLen)
	if cap(b.Cells) < n {
		b.Cells = make([]int, n)
	}
	b.Cells = b.Cells[:n]
	if cap(b.Ends) < n {
		b.Ends = make([]int, n)
	}
	b.Ends = b.Ends[:n]
	for i, w := range refs {
		tg := r.Window(w.Cell, w.T, b.Inputs[i*WindowLen:(i+1)*WindowLen])
		b.Cells[i] = r.Cells[w.Cell].ClusterID
		b.Ends[i] = w.T
		if targets != nil {
			targets[i] = tg
		}
	}
}

// grow returns s resized to n, reusing its capacity when it suffices.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
