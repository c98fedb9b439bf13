// Package daemon is predictord's core for one device, free of NATS: the
// shared 1024-bin stimulus ring, every served cell's autoregressive state
// (rollout.Cell: next window end and its own generated spikes), the batching
// of every cell due at a frame into one Predict call, and the robustness
// rules of docs/protocol.md (stale and duplicate frames, gaps, clamping,
// late histories, overload). The stepping rule is rollout.Step via
// rollout.Cell, the one the offline rollout uses, so for the same stimulus,
// predictor and initial histories the core emits the offline rollout's
// spikes.
//
// A Core is not safe for concurrent use: one goroutine feeds it.
package daemon

import (
	"fmt"
	"math"
	"slices"
	"time"

	"rgcpred/model"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// Sink receives what the core produces. Its methods are called from the
// goroutine feeding the core and must not retain their slices.
type Sink interface {
	// Decisions receives decisions taken at frame t (at least one): those
	// of one model call, so several calls per frame when more than MaxBatch
	// cells are due.
	Decisions(t int64, ds []stream.Decision)
	// Batch reports one Predict call of n windows that took d.
	Batch(n int, d time.Duration)
}

// Config configures a Core.
type Config struct {
	// Known holds every cell (cluster id) the checkpoint knows.
	Known []int
	// Cells holds the cells this core serves, a subset of Known, each once.
	Cells []int
	// All is the device's whole cell list before sharding, ascending (nil:
	// Cells, sorted); it holds every cell of Cells. The staggered starts
	// are computed over it, so every shard agrees.
	All []int
	// Stagger starts the cells at staggered phases (rollout.StartOffset):
	// the cell at index i of All has its first window end at
	// first + 1023 + rollout.StartOffset(i, len(All)) instead of
	// first + 1023, spreading the model calls over the frames. Without it
	// every cell starts at first + 1023 (the spec's simultaneous start).
	Stagger bool
	// MaxBatch is the largest number of windows per Predict call; 0 means
	// len(Cells).
	MaxBatch int
	// MaxLag is the overload threshold in bins: a decision due at frame t is
	// skipped (the cell steps as "no spike" without running the model) when
	// the newest frame received is more than MaxLag bins past t. 0 disables
	// skipping.
	MaxLag int64
	// Newest, if not nil, returns the newest frame seq received so far; the
	// overload check consults it again before every model call after the
	// first of a frame, since frames keep arriving while the model runs.
	Newest func() int64
	// PublishSilence also emits KindSilence decisions (median class "no
	// spike in the next rgc.Horizon bins"); otherwise only spikes.
	PublishSilence bool
}

// Stats counts what the core did. Every field only grows.
type Stats struct {
	// Frames is the number of frames accepted (stale frames excluded).
	Frames uint64
	// Stale counts frames dropped because their seq was not past the last
	// processed one but less than rgc.WindowBins behind it (duplicates, late
	// or out-of-order frames).
	Stale uint64
	// GapBins counts missing bins filled by holding the last frame.
	GapBins uint64
	// Clamped counts frames with an intensity clamped into
	// [stream.MinIntensity, stream.MaxIntensity].
	Clamped uint64
	// Restarts counts stream restarts: a frame more than rgc.WindowBins
	// bins after the last one (a long gap) or at least that many behind it
	// (the device restarted its numbering without a reset).
	Restarts uint64
	// Resets counts reset control messages.
	Resets uint64
	// Histories counts initial histories accepted.
	Histories uint64
	// UnknownCell counts histories for cells the checkpoint does not know.
	UnknownCell uint64
	// HistoryLate counts histories that arrived after the cell's first
	// window was predicted.
	HistoryLate uint64
	// Predictions counts windows predicted.
	Predictions uint64
	// Spikes counts spike decisions.
	Spikes uint64
	// DeadlineMisses counts decisions skipped by the overload policy.
	DeadlineMisses uint64
	// PredictErrors counts windows whose prediction failed (error, panic or
	// non-finite output); the cell steps as "no spike".
	PredictErrors uint64
}

type pending struct {
	has    bool
	spikes [rgc.WindowBins]bool
}

// Core is the per-device state machine.
type Core struct {
	cfg   Config
	pred  rgc.Predictor
	sink  Sink
	known map[int]bool
	index map[int]int // served cluster id -> index into cells

	cells   []rollout.Cell
	pending []pending
	offset  []int // first window end of cell i: first + 1023 + offset[i]

	stim    [rgc.StimChannels][rgc.WindowBins]float32
	stimWin [rgc.StimChannels * rgc.WindowBins]float32
	started bool
	first   int64 // first seq of the stream
	last    int64 // last bin processed
	held    [rgc.StimChannels]float32
	heldT   int64

	batch   rgc.Batch
	inputs  []float32
	cellBuf []int
	endBuf  []int
	probs   []float32
	due     []int
	out     []stream.Decision

	stats   Stats
	lastErr error
}

// New returns a core serving cfg.Cells with predictor p, sending its output
// to sink.
func New(p rgc.Predictor, sink Sink, cfg Config) (*Core, error) {
	if p == nil || sink == nil {
		return nil, fmt.Errorf("daemon: nil predictor or sink")
	}
	if len(cfg.Cells) == 0 {
		return nil, fmt.Errorf("daemon: no cells to serve")
	}
	if cfg.MaxBatch <= 0 || cfg.MaxBatch > len(cfg.Cells) {
		cfg.MaxBatch = len(cfg.Cells)
	}
	if cfg.MaxLag < 0 {
		return nil, fmt.Errorf("daemon: negative max lag %d", cfg.MaxLag)
	}
	c := &Core{cfg: cfg, pred: p, sink: sink, known: make(map[int]bool, len(cfg.Known)), index: make(map[int]int, len(cfg.Cells))}
	for _, id := range cfg.Known {
		c.known[id] = true
	}
	for i, id := range cfg.Cells {
		if !c.known[id] {
			return nil, fmt.Errorf("daemon: cell %d is not in the checkpoint's cells", id)
		}
		if _, dup := c.index[id]; dup {
			return nil, fmt.Errorf("daemon: cell %d listed twice", id)
		}
		if id < 0 || id > stream.MaxCellID {
			return nil, fmt.Errorf("daemon: cell id %d outside 0..%d", id, stream.MaxCellID)
		}
		c.index[id] = i
	}
	c.cfg.Cells = slices.Clone(cfg.Cells)
	all := cfg.All
	if all == nil {
		all = slices.Sorted(slices.Values(cfg.Cells))
	}
	if !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
		return nil, fmt.Errorf("daemon: the whole cell list is not strictly ascending")
	}
	c.offset = make([]int, len(cfg.Cells))
	for i, id := range cfg.Cells {
		j, ok := slices.BinarySearch(all, id)
		if !ok {
			return nil, fmt.Errorf("daemon: served cell %d is not in the whole cell list", id)
		}
		if cfg.Stagger {
			c.offset[i] = rollout.StartOffset(j, len(all))
		}
	}
	c.cfg.All = slices.Clone(all)
	n, mb := len(cfg.Cells), cfg.MaxBatch
	c.cells = make([]rollout.Cell, n)
	c.pending = make([]pending, n)
	c.inputs = make([]float32, mb*rgc.WindowLen)
	c.cellBuf = make([]int, mb)
	c.endBuf = make([]int, mb)
	c.probs = make([]float32, mb*rgc.NumClasses)
	c.due = make([]int, 0, n)
	c.out = make([]stream.Decision, 0, n)
	c.last = -1
	return c, nil
}

// SetPredictor swaps the predictor (checkpoint reload); cell states are kept.
func (c *Core) SetPredictor(p rgc.Predictor) { c.pred = p }

// Cells returns the served cells.
func (c *Core) Cells() []int { return slices.Clone(c.cfg.Cells) }

// Stats returns the counters.
func (c *Core) Stats() Stats { return c.stats }

// LastSeq returns the last bin processed, -1 before the first frame.
func (c *Core) LastSeq() int64 {
	if !c.started {
		return -1
	}
	return c.last
}

// LastError returns the last prediction error (nil if none).
func (c *Core) LastError() error { return c.lastErr }

// Next returns the end bin of the next window of a served cell.
func (c *Core) Next(cell int) (int64, bool) {
	i, ok := c.index[cell]
	if !ok || !c.started {
		return 0, false
	}
	return int64(c.cells[i].Next), true
}

// Frames processes a decoded frames message. latest is the newest frame seq
// the caller has received (it drives the overload policy; pass
// f.LastSeq() when there is no backlog). It allocates nothing.
func (c *Core) Frames(f *stream.Frames, latest int64) {
	for i := range f.Frames {
		c.frame(f.FirstSeq+int64(i), &f.Frames[i], latest)
	}
}

func (c *Core) frame(seq int64, fr *stream.Frame, latest int64) {
	switch {
	case !c.started:
		c.start(seq)
	case seq <= c.last && c.last-seq < rgc.WindowBins:
		c.stats.Stale++
		return
	case seq <= c.last || seq-c.last-1 > rgc.WindowBins:
		// A jump of more than a window either way: a new stream (e.g. the
		// device restarted without a reset, or a long outage).
		c.stats.Restarts++
		c.start(seq)
	default:
		for b := c.last + 1; b < seq; b++ {
			c.stats.GapBins++
			c.bin(b, c.held, c.heldT, latest)
		}
	}
	led := fr.LED
	clamped := false
	for ch, v := range led {
		if v < stream.MinIntensity {
			led[ch], clamped = stream.MinIntensity, true
		} else if v > stream.MaxIntensity {
			led[ch], clamped = stream.MaxIntensity, true
		}
	}
	if clamped {
		c.stats.Clamped++
	}
	c.stats.Frames++
	c.bin(seq, led, fr.Time, latest)
}

// start begins a stream at frame seq: every cell's first window ends at
// seq+1023 (plus its stagger offset) with its pending history or zeros.
func (c *Core) start(seq int64) {
	c.started = true
	c.first = seq
	c.last = seq - 1
	for i := range c.cells {
		c.cells[i].Reset(c.cfg.Cells[i], c.firstEnd(i), nil)
		if c.pending[i].has {
			c.applyHistory(i, &c.pending[i].spikes)
			c.pending[i].has = false
		}
	}
}

// firstEnd returns the end bin of cell i's first window in the current
// stream.
func (c *Core) firstEnd(i int) int {
	return int(c.first) + rgc.WindowBins - 1 + c.offset[i]
}

// StartOffset returns the stagger offset of a served cell: its first window
// ends this many bins after first + 1023 (0 without Config.Stagger).
func (c *Core) StartOffset(cell int) (int, bool) {
	i, ok := c.index[cell]
	if !ok {
		return 0, false
	}
	return c.offset[i], true
}

func (c *Core) applyHistory(i int, spikes *[rgc.WindowBins]bool) {
	t0 := c.firstEnd(i)
	c.cells[i].Reset(c.cfg.Cells[i], t0, nil)
	for j, s := range spikes {
		if s {
			c.cells[i].History.Mark(t0 - (rgc.WindowBins - 1) + j)
		}
	}
}

// bin processes bin b: store its stimulus, then predict every cell whose
// window ends at b.
func (c *Core) bin(b int64, led [rgc.StimChannels]float32, ts int64, latest int64) {
	s := int(b & (rgc.WindowBins - 1))
	for ch := range led {
		c.stim[ch][s] = led[ch]
	}
	c.last, c.held, c.heldT = b, led, ts
	if b < c.first+rgc.WindowBins-1 {
		return
	}
	c.due = c.due[:0]
	for i := range c.cells {
		if int64(c.cells[i].Next) == b {
			c.due = append(c.due, i)
		}
	}
	if len(c.due) == 0 {
		return
	}
	if c.stale(b, latest) {
		c.skip(c.due)
		return
	}
	// The stimulus rows are the same for every cell: unroll the ring once.
	for ch := range c.stim {
		row := c.stimWin[ch*rgc.WindowBins : (ch+1)*rgc.WindowBins]
		n := copy(row, c.stim[ch][s+1:])
		copy(row[n:], c.stim[ch][:s+1])
	}
	// Publish after every model call, so the first chunks' decisions do not
	// wait for the last chunk's.
	for lo := 0; lo < len(c.due); lo += c.cfg.MaxBatch {
		chunk := c.due[lo:min(lo+c.cfg.MaxBatch, len(c.due))]
		if lo > 0 && c.stale(b, latest) { // fell behind during the previous calls
			c.skip(chunk)
			continue
		}
		c.out = c.out[:0]
		c.predict(chunk, b, ts)
		if len(c.out) > 0 {
			c.sink.Decisions(b, c.out)
		}
	}
}

// stale reports whether decisions due at bin b are too late to matter: the
// newest frame received (latest, or Config.Newest when set and later) is more
// than MaxLag bins past b.
func (c *Core) stale(b, latest int64) bool {
	if c.cfg.MaxLag <= 0 {
		return false
	}
	if c.cfg.Newest != nil {
		latest = max(latest, c.cfg.Newest())
	}
	return latest-b > c.cfg.MaxLag
}

// skip steps the cells as "no spike" without running the model (overload).
func (c *Core) skip(cells []int) {
	for _, i := range cells {
		c.cells[i].Advance(rgc.NoSpikeClass)
	}
	c.stats.DeadlineMisses += uint64(len(cells))
}

func (c *Core) predict(chunk []int, b, ts int64) {
	n := len(chunk)
	c.batch.Inputs, c.batch.Cells, c.batch.Ends = c.inputs[:n*rgc.WindowLen], c.cellBuf[:n], c.endBuf[:n]
	for j, i := range chunk {
		win := c.batch.Inputs[j*rgc.WindowLen : (j+1)*rgc.WindowLen]
		copy(win, c.stimWin[:])
		c.cells[i].History.FillRow(win[rgc.SpikeRow*rgc.WindowBins:])
		c.batch.Cells[j] = c.cells[i].ID
		c.batch.Ends[j] = int(b)
	}
	probs := c.probs[:n*rgc.NumClasses]
	start := time.Now()
	err := c.safePredict(probs)
	c.sink.Batch(n, time.Since(start))
	if err != nil {
		c.lastErr = err
		c.stats.PredictErrors += uint64(n)
		for _, i := range chunk {
			c.cells[i].Advance(rgc.NoSpikeClass)
		}
		return
	}
	for j, i := range chunk {
		row := probs[j*rgc.NumClasses : (j+1)*rgc.NumClasses]
		if !validDist(row) {
			c.lastErr = fmt.Errorf("daemon: cell %d window %d: predictor returned an invalid distribution", c.cells[i].ID, b)
			c.stats.PredictErrors++
			c.cells[i].Advance(rgc.NoSpikeClass)
			continue
		}
		k := model.Median(row)
		next, spike := c.cells[i].Advance(k)
		c.stats.Predictions++
		d := stream.Decision{Cell: int32(c.cells[i].ID), End: b, Bin: int64(next), Prob: min(max(row[k], 0), 1), FrameTime: ts}
		switch {
		case spike:
			c.stats.Spikes++
			d.Kind = stream.KindSpike
		case c.cfg.PublishSilence:
			d.Kind = stream.KindSilence
		default:
			continue
		}
		c.out = append(c.out, d)
	}
}

// safePredict runs the predictor, turning a panic into an error.
func (c *Core) safePredict(out []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("daemon: predictor panicked: %v", r)
		}
	}()
	return c.pred.Predict(&c.batch, out)
}

func validDist(row []float32) bool {
	for _, p := range row {
		if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) || p < 0 {
			return false
		}
	}
	return true
}

// Control applies a control message (reset or initial histories).
func (c *Core) Control(m *stream.Control) {
	switch m.Op {
	case stream.OpReset:
		c.stats.Resets++
		c.started = false
		c.last = -1
		for i := range c.pending {
			c.pending[i].has = false
		}
	case stream.OpHistory:
		for hi := range m.Histories {
			h := &m.Histories[hi]
			i, ok := c.index[int(h.Cell)]
			if !ok {
				if !c.known[int(h.Cell)] {
					c.stats.UnknownCell++
				}
				continue // another shard's cell
			}
			switch {
			case !c.started:
				c.pending[i] = pending{has: true, spikes: h.Spikes}
			case c.last < int64(c.firstEnd(i)):
				c.applyHistory(i, &h.Spikes)
			default:
				c.stats.HistoryLate++
				continue
			}
			c.stats.Histories++
		}
	}
}
