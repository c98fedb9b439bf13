package synth

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"rgcpred/rgc"
)

var _ rgc.Predictor = (*Oracle)(nil)

// maxTreeNodes bounds the size of the oracle's tree of futures; a truth whose
// frames are so short and latencies so small that more futures matter is
// refused rather than evaluated slowly.
const maxTreeNodes = 5_000_000

// Oracle is the exact next-spike predictor of a synthetic recording: it
// implements rgc.Predictor with the Bayes-optimal class probabilities (see
// the package documentation). It is not safe for concurrent use; make one
// per goroutine (they are cheap to copy with Clone).
type Oracle struct {
	fr      *frames
	cells   []*cellModel
	byID    map[int]int
	lengths []FrameLength               // positive-probability lengths, ascending
	tail    []float64                   // tail[x] = P(length >= x), x = 0..maxLen+1
	maxNew  int                         // most new frames that can affect the horizon
	ahead   int                         // look-ahead: frames starting up to t+ahead are known
	stim    [rgc.StimChannels][]float32 // the model's binned stimulus, for checks
	raw     *rgc.Raw                    // the stimulus source, to rebin in another mode
	win     *windowScratch              // set by NewWindowOracle: read the stimulus from the windows

	// Scratch, reused across calls.
	lam   [][]float64 // per tree depth: lambda of bins t+1..t+Horizon
	surv  [][]float64 // per tree depth: survival before each bin
	probs []float64   // NumClasses
	spk   []int32     // spike bins of the current window's history
}

// NewOracle builds the oracle of a synthetic recording from its stimulus
// (raw's pattern and triggers, which must fall on bin boundaries) and its
// true parameters. Cells are looked up by cluster id. Windows are expected
// in the default stimulus mode, rgc.StimCausal (SetStimMode changes it).
func NewOracle(raw *rgc.Raw, tr *Truth) (*Oracle, error) {
	if err := tr.Validate(); err != nil {
		return nil, fmt.Errorf("synth oracle: %w", err)
	}
	fr, err := framesFromRaw(raw)
	if err != nil {
		return nil, fmt.Errorf("synth oracle: %w", err)
	}
	if len(raw.Cells) != len(tr.Cells) {
		return nil, fmt.Errorf("synth oracle: recording %s has %d cells but the truth has %d", raw.Name, len(raw.Cells), len(tr.Cells))
	}
	for i := range raw.Cells {
		if raw.Cells[i].ClusterID != tr.Cells[i].ClusterID {
			return nil, fmt.Errorf("synth oracle: recording %s cell %d is cluster %d but the truth's is %d", raw.Name, i, raw.Cells[i].ClusterID, tr.Cells[i].ClusterID)
		}
	}
	o, err := newTables(tr)
	if err != nil {
		return nil, fmt.Errorf("synth oracle: %w", err)
	}
	o.fr, o.raw = fr, raw
	o.stim = rgc.BinStimulus(rgc.StimCausal, raw.Pattern, raw.Triggers, raw.NumSamples)
	return o, nil
}

// newTables builds an oracle's per-cell models, frame-length tables and
// scratch from a validated truth, without a stimulus.
func newTables(tr *Truth) (*Oracle, error) {
	o := &Oracle{byID: map[int]int{}}
	for _, l := range tr.FrameLengths {
		if l.Prob > 0 {
			o.lengths = append(o.lengths, l)
		}
	}
	sort.Slice(o.lengths, func(i, j int) bool { return o.lengths[i].Bins < o.lengths[j].Bins })
	// Validate bounds the lengths by MaxFrameLengthBins, so the table is
	// small; it is filled in time linear in its length plus the number of
	// lengths.
	maxLen := o.lengths[len(o.lengths)-1].Bins
	o.tail = make([]float64, maxLen+2)
	for _, l := range o.lengths {
		o.tail[l.Bins] += l.Prob
	}
	for x := maxLen; x >= 0; x-- {
		o.tail[x] += o.tail[x+1]
	}
	minLen := o.lengths[0].Bins
	minLat := rgc.WindowBins
	for i := range tr.Cells {
		m := newCellModel(&tr.Cells[i])
		o.cells = append(o.cells, m)
		o.byID[tr.Cells[i].ClusterID] = i
		minLat = min(minLat, m.latency)
	}
	// New frames start at t+1 at the earliest and are minLen apart; only
	// those starting at or before t+Horizon-latency change the horizon.
	if minLat < rgc.Horizon {
		o.maxNew = (rgc.Horizon-1-minLat)/minLen + 1
	}
	nodes, level := 1.0, 1.0
	for d := 0; d < o.maxNew; d++ {
		level *= float64(len(o.lengths) * numPatterns)
		nodes += level
	}
	if nodes > maxTreeNodes {
		return nil, fmt.Errorf("up to %d new frames (of %d lengths) can affect the next %d bins (shortest frame %d bins, shortest latency %d bins): %.3g futures exceed the limit of %d",
			o.maxNew, len(o.lengths), rgc.Horizon, minLen, minLat, nodes, maxTreeNodes)
	}
	o.alloc()
	return o, nil
}

func (o *Oracle) alloc() {
	o.lam = make([][]float64, o.maxNew+1)
	o.surv = make([][]float64, o.maxNew+1)
	for d := range o.lam {
		o.lam[d] = make([]float64, rgc.Horizon)
		o.surv[d] = make([]float64, rgc.Horizon)
	}
	o.probs = make([]float64, rgc.NumClasses)
	o.spk = make([]int32, 0, rgc.WindowBins)
}

// stimTolerance is how far a window's stimulus may differ from the
// recording's binned stimulus before Predict reports a mismatch.
const stimTolerance = 1e-3

// SetStimMode sets the stimulus mode of the windows Predict is given (their
// last stimulus column is checked against the recording binned in that
// mode); the prediction itself reads the frames, not the window. A window
// oracle (NewWindowOracle) reads causal windows only and ignores it.
func (o *Oracle) SetStimMode(m rgc.StimMode) {
	if o.raw == nil {
		return
	}
	o.stim = rgc.BinStimulus(m, o.raw.Pattern, o.raw.Triggers, o.raw.NumSamples)
}

// SetLookahead makes the oracle also know every stimulus frame that starts
// up to bins bins after the window's end (0, the default, is the
// specification's oracle: stimulus known up to t). With causal bins
// (rgc.StimCausal, frames on bin boundaries) a window ending at t holds
// exactly the frames up to t, so look-ahead 0 is the floor. With
// rgc.StimZeroPhase the input rows come from a zero-phase low-pass filter
// reaching rgc.StimFilterHalfTaps/rgc.Decimation = 16 bins ahead, so a
// window ending at t carries some information about frames starting up to
// t+16; the oracle with that look-ahead bounds from below the NLL any model
// of such a window can reach.
func (o *Oracle) SetLookahead(bins int) error {
	if bins < 0 || bins > rgc.Horizon {
		return fmt.Errorf("synth oracle: look-ahead %d bins, want 0..%d", bins, rgc.Horizon)
	}
	o.ahead = bins
	return nil
}

// ModelLookahead is the look-ahead in bins of the model's stimulus binned
// in rgc.StimZeroPhase: the half-length of its filter (causal bins have
// none).
const ModelLookahead = rgc.StimFilterHalfTaps / rgc.Decimation

// Clone returns an oracle sharing o's read-only tables with its own
// scratch, for use from another goroutine.
func (o *Oracle) Clone() *Oracle {
	c := *o
	c.alloc()
	if o.win != nil {
		c.win = &windowScratch{}
	}
	return &c
}

// OracleFromDir loads a synthetic recording written by `trainer synth` (its
// recording files and truth.json) and builds its oracle.
func OracleFromDir(dir string) (*Oracle, error) {
	raw, err := rgc.LoadRaw(dir)
	if err != nil {
		return nil, fmt.Errorf("synth oracle: %w", err)
	}
	tr, err := LoadTruth(dir)
	if err != nil {
		return nil, fmt.Errorf("synth oracle: %w", err)
	}
	o, err := NewOracle(raw, tr)
	if err != nil {
		return nil, fmt.Errorf("synth oracle %s: %w", dir, err)
	}
	return o, nil
}

// NumCells returns the number of cells the oracle knows.
func (o *Oracle) NumCells() int { return len(o.cells) }

// CellIndex returns the index (in truth order) of the cell with the given
// cluster id.
func (o *Oracle) CellIndex(clusterID int) (int, bool) {
	i, ok := o.byID[clusterID]
	return i, ok
}

// Predict implements rgc.Predictor: for window i, cell b.Cells[i] (a
// cluster id) and end bin b.Ends[i] (a recording bin), it writes the exact
// class probabilities. The spike history is read from the window's spike row
// (so generated spikes in a rollout are honoured); the stimulus is looked up
// in the recording by b.Ends, which must therefore be recording bins: each
// window's last stimulus column is checked against the recording's binned
// stimulus (rgc.BinStimulus in the oracle's mode, SetStimMode) at
// b.Ends[i], and a mismatch is an error. A window oracle (NewWindowOracle)
// reads the stimulus from the window instead and ignores b.Ends.
func (o *Oracle) Predict(b *rgc.Batch, out []float32) error {
	if err := b.Check(); err != nil {
		return fmt.Errorf("synth oracle: %w", err)
	}
	n := b.Len()
	if len(out) < n*rgc.NumClasses {
		return fmt.Errorf("synth oracle: output has %d floats for %d windows, want %d", len(out), n, n*rgc.NumClasses)
	}
	for i := 0; i < n; i++ {
		ci, ok := o.byID[b.Cells[i]]
		if !ok {
			return fmt.Errorf("synth oracle: window %d: unknown cell (cluster id %d)", i, b.Cells[i])
		}
		win := b.Inputs[i*rgc.WindowLen:][:rgc.WindowLen]
		if o.win != nil {
			if err := o.predictWindow(ci, win); err != nil {
				return fmt.Errorf("synth window oracle: window %d (cluster %d): %w", i, b.Cells[i], err)
			}
			dst := out[i*rgc.NumClasses:][:rgc.NumClasses]
			for k, p := range o.probs {
				dst[k] = float32(p)
			}
			continue
		}
		t := b.Ends[i]
		if t >= 0 && t < len(o.stim[0]) {
			for c := range o.stim {
				got, want := win[c*rgc.WindowBins+rgc.WindowBins-1], o.stim[c][t]
				if math.Abs(float64(got-want)) > stimTolerance {
					return fmt.Errorf("synth oracle: window %d (cluster %d): LED %d reads %g at its last bin but the recording has %g at end bin %d: the window's stimulus does not come from this recording at b.Ends", i, b.Cells[i], c, got, want, t)
				}
			}
		}
		row := win[rgc.SpikeRow*rgc.WindowBins:][:rgc.WindowBins]
		o.spk = o.spk[:0]
		first := max(0, rgc.WindowBins-len(o.cells[ci].hist))
		for j := first; j < rgc.WindowBins; j++ {
			if row[j] > 0.5 {
				o.spk = append(o.spk, int32(t-(rgc.WindowBins-1-j)))
			}
		}
		if err := o.probsAt(ci, t, o.spk); err != nil {
			return fmt.Errorf("synth oracle: window %d (cluster %d, end bin %d): %w", i, b.Cells[i], t, err)
		}
		dst := out[i*rgc.NumClasses:][:rgc.NumClasses]
		for k, p := range o.probs {
			dst[k] = float32(p)
		}
	}
	return nil
}

// Probs writes to out (NumClasses float64s) the exact class probabilities
// for cell cellIdx (truth order) after the window ending at bin t, given
// the cell's spike bins up to t (ascending; only the last len(history
// filter) bins before t+1 matter, earlier ones and ones after t are ignored).
func (o *Oracle) Probs(cellIdx, t int, spikes []int32, out []float64) error {
	if cellIdx < 0 || cellIdx >= len(o.cells) {
		return fmt.Errorf("synth oracle: cell index %d out of range [0, %d)", cellIdx, len(o.cells))
	}
	if len(out) < rgc.NumClasses {
		return fmt.Errorf("synth oracle: output has %d floats, want %d", len(out), rgc.NumClasses)
	}
	// Keep the spikes in (t - len(hist), t].
	hi := sort.Search(len(spikes), func(i int) bool { return int(spikes[i]) > t })
	lo := sort.Search(hi, func(i int) bool { return int(spikes[i]) > t-len(o.cells[cellIdx].hist) })
	if err := o.probsAt(cellIdx, t, spikes[lo:hi]); err != nil {
		return fmt.Errorf("synth oracle: cell %d, end bin %d: %w", cellIdx, t, err)
	}
	copy(out, o.probs)
	return nil
}

// probsAt computes o.probs for cell ci after bin t given the spike bins
// (ascending, <= t) that the history filter can reach.
func (o *Oracle) probsAt(ci, t int, spikes []int32) error {
	fr := o.fr
	if fr == nil {
		return errors.New("a window oracle reads its stimulus from windows (Predict), not from recording bins")
	}
	if t < 0 || t >= fr.end() {
		return fmt.Errorf("end bin %d outside the recording's stimulus [0, %d)", t, fr.end())
	}
	known := min(t+o.ahead, fr.end()-1) // last bin whose frame is known
	f := fr.frameAt(known)
	if f < 0 {
		return fmt.Errorf("end bin %d is before the first stimulus frame (bin %d)", t, fr.start[0])
	}
	m := o.cells[ci]
	e0 := fr.start[f]
	age := known - e0 + 1 // the current frame lasts at least this long
	if age >= len(o.tail) || o.tail[age] <= 0 {
		return fmt.Errorf("the frame covering it started %d bins earlier, longer than any frame length of the truth", age-1)
	}

	o.baseIntensity(m, fr, f, t, spikes)
	for k := range o.probs {
		o.probs[k] = 0
	}
	o.node(m, t, 0, 0, 1, 1, e0, int(fr.pat[f]), age)
	return nil
}

// baseIntensity fills o.lam[0] with lambda of bins t+1..t+Horizon with no
// further spike and frame f (covering t) continuing, given the spike bins
// (ascending, <= t) the history filter can reach.
func (o *Oracle) baseIntensity(m *cellModel, fr *frames, f, t int, spikes []int32) {
	lam := o.lam[0]
	for i := range lam {
		lam[i] = m.bias + m.stimDrive(fr, t+1+i, f)
	}
	nh := len(m.hist)
	for _, q := range spikes {
		q := int(q)
		if q > t || t+1-q > nh {
			continue
		}
		for u := t + 1; u <= min(t+rgc.Horizon, q+nh); u++ {
			lam[u-t-1] += m.hist[u-q-1]
		}
	}
	for i, v := range lam {
		lam[i] = math.Exp(v)
	}
}

// node adds to o.probs the contribution of one node of the tree of futures:
// the frame with pattern p started at bin e, lambda of bins t+1+i for
// i >= from is o.lam[depth][i], the probability of no spike before bin
// t+1+from is s, and the node's probability weight is w. The frame's length
// L is distributed as the frame-length distribution restricted to
// L >= minLen. Bin t+1+i is counted
// here with the probability that the next frame has not yet changed it,
// P(e + L + latency > t+1+i); later bins of futures in which it has are
// counted by the children, one per length and pattern of the next frame.
func (o *Oracle) node(m *cellModel, t, depth, from int, s, w float64, e, p, minLen int) {
	lam, surv := o.lam[depth], o.surv[depth]
	wz := w / o.tail[minLen] // weight per unit of unconditional length probability
	for i := from; i < rgc.Horizon; i++ {
		surv[i] = s
		q := survive(lam[i])
		// The next frame changes bin u = t+1+i only when
		// e + L + latency <= u, i.e. L <= u-e-latency.
		if stay := o.tailFrom(t+1+i-e-m.latency+1, minLen); stay != 0 {
			o.probs[i] += wz * stay * s * (1 - q)
		}
		s *= q
	}
	o.probs[rgc.NoSpikeClass] += wz * o.tailFrom(t+rgc.Horizon-e-m.latency+1, minLen) * s

	if depth == len(o.lam)-1 {
		return
	}
	for _, l := range o.lengths {
		if l.Bins < minLen {
			continue
		}
		e1 := e + l.Bins
		start := e1 + m.latency - t - 1 // first bin index the switch changes
		if start >= rgc.Horizon {
			break // lengths ascend: later ones start even later
		}
		wl := wz * l.Prob / float64(numPatterns)
		// A leaf: the frame after this child cannot change the horizon
		// (it starts at least the shortest length later), so the child's
		// bins all count with weight wl and it has no children.
		leaf := e1+o.lengths[0].Bins+m.latency > t+rgc.Horizon
		child := o.lam[depth+1]
		for q := 0; q < numPatterns; q++ {
			ed := m.expDelta[(p*numPatterns+q)*rgc.Horizon:][:rgc.Horizon]
			if leaf {
				o.leaf(lam[start:], ed[t+1+start-e1:], start, surv[start], wl)
				continue
			}
			for i := start; i < rgc.Horizon; i++ {
				child[i] = lam[i] * ed[t+1+i-e1]
			}
			o.node(m, t, depth+1, start, surv[start], wl, e1, q, 0)
		}
	}
}

// leaf adds the contribution of a tree node whose drive no later frame
// changes within the horizon: bins from..Horizon-1 have intensity
// lam[i-from] * ed[i-from], the survival before bin from is s and the
// node's weight is w. It is node's loop with every weight of staying 1.
func (o *Oracle) leaf(lam, ed []float64, from int, s, w float64) {
	probs := o.probs[from:rgc.Horizon]
	ed = ed[:len(probs)]
	lam = lam[:len(probs)]
	for i := range probs {
		q := survive(lam[i] * ed[i])
		probs[i] += w * s * (1 - q)
		s *= q
	}
	o.probs[rgc.NoSpikeClass] += w * s
}

// tailFrom returns P(L >= max(x, minLen)) under the unconditional
// frame-length distribution.
func (o *Oracle) tailFrom(x, minLen int) float64 {
	x = max(x, minLen, 0)
	if x >= len(o.tail) {
		return 0
	}
	return o.tail[x]
}

// survive returns exp(-lambda), the probability of no spike in a bin of
// intensity lambda. Below lambda = 0.02 (20 Hz), where almost every bin of
// the drawn cells lies, it sums the Taylor series of 1 - exp(-lambda) to
// the sixth power: the truncation error is below lambda^7/7! < 3e-16, under
// the rounding error of math.Exp, and the polynomial is several times
// cheaper.
func survive(lambda float64) float64 {
	if lambda < 0.02 {
		l := lambda
		p := l * (1 - l/2*(1-l/3*(1-l/4*(1-l/5*(1-l/6)))))
		return 1 - p
	}
	return math.Exp(-lambda)
}
