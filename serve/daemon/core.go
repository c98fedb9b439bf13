// Package daemon is predictord's core for one device, free of NATS: it
// turns frames and control messages into the offline rollout's decisions.
//
// What it holds: the shared stimulus ring (a window, and room for windows
// that fall due late); every served cell's autoregressive state
// (rollout.Cell); the batching of the cells due at a frame into one
// Predict call (announced a frame ahead, rgc.Expecter; decisions sent as
// the predictor hands windows over, rgc.Progressive); the robustness rules
// of docs/protocol.md (stale and duplicate frames, gaps, clamping, late
// histories, overload, stream epochs).
//
// Invariants:
//   - The stepping rule is rollout.Step via rollout.Cell: for the same
//     stimulus, predictor and initial histories the core emits the offline
//     rollout's spikes.
//   - No input sequence stops the core from deciding.
//   - Every window that falls due yields exactly one decision to the sink
//     (a spike, a silence with Config.PublishSilence, or a KindSkipped
//     decision when the model was not run or failed), stamped with its
//     stream's epoch.
//   - A frame that does not continue the current stream never moves the
//     current stream's clock.
//   - A new numbering is adopted only once Config.ConfirmFrames of its
//     frames arrived with no frame of the current stream among them; the
//     sink then hears Sink.Stream.
//   - A Core is not safe for concurrent use: one goroutine feeds it.
package daemon

import (
	"fmt"
	"slices"
	"time"

	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// Sink receives what the core produces. Its methods are called from the
// goroutine feeding the core and must not retain their slices.
type Sink interface {
	// Decisions receives the decisions of one model call (at least one)
	// while the core processes frame t: several calls per frame when more
	// than MaxBatch cells are due, and windows of several bins up to t in
	// one call when the core gathers them (Config.Gather). With a
	// predictor that hands its windows over as they are computed
	// (rgc.Progressive), a call's decisions come in parts, in the same
	// order, during the call. Core.Call tells which call took them.
	Decisions(t int64, ds []stream.Decision)
	// Batch reports one Predict call of n windows that took d, after the
	// decisions sent during it.
	Batch(n int, d time.Duration)
	// Stream reports that a new stream epoch began: every cell's spike
	// history is lost unless a history arrives before its first window.
	Stream(ev stream.Event)
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
	// MaxLag is the overload threshold in bins: a decision due at bin t is
	// skipped (the cell steps as "no spike" without running the model and a
	// KindSkipped decision goes out) when the core is more than MaxLag
	// bins behind the receive edge: the bins from t to the frame being
	// processed, plus the frames after it in its message, plus the backlog
	// of frames received and not yet given to the core. 0 disables
	// skipping. The lag counts frames received, never sequence numbers
	// announced, so no message can make the core believe it is behind.
	MaxLag int64
	// Backlog, if not nil, returns the number of frames received but not
	// yet given to the core; the overload check consults it before every
	// model call, since frames keep arriving while the model runs. When nil
	// the backlog passed to Frames is used.
	Backlog func() int64
	// ConfirmFrames is the number of frames of a new numbering (a frame
	// more than a window after the last one, or a window or more behind
	// it) that must arrive, with no frame of the current stream among
	// them, before the core restarts the stream at the new numbering; the
	// frames are held meanwhile and processed after the restart, so none
	// is lost. 0 means DefaultConfirmFrames.
	ConfirmFrames int
	// BinPeriod is the stream's nominal bin period (rgc.BinRateHz's);
	// with it, frames given with their arrival time (FramesAt) follow the
	// wall-time numbering rules: a frame that skips bins continues the
	// stream at once only when the wall time since its last bin's date
	// on its most on-time frame's schedule covers the skipped bins (plus
	// GapSlack; Core.FramesAt), and a new numbering (or a
	// longer jump) is adopted only after ConfirmFrames of its frames and
	// ConfirmWait without a frame of the current stream. So a publisher
	// that keeps sending keeps its device, and no message makes the core
	// believe it is behind. 0: the rules use frame counts only.
	BinPeriod time.Duration
	// GapSlack is the bins a frame may skip beyond those the wall time
	// covers (jitter of a paced device); 0 means DefaultGapSlack.
	GapSlack int64
	// ConfirmWait is how long the current stream must be silent before a
	// new numbering is adopted (with BinPeriod); 0 means
	// DefaultConfirmWait.
	ConfirmWait time.Duration
	// PublishSilence also emits KindSilence decisions (chosen class "no
	// spike in the next rgc.Horizon bins"); otherwise only spikes.
	PublishSilence bool
	// Policy chooses each window's class from the model's distribution
	// (nil: rollout.Median, the paper's rule); the offline rollout with the
	// same policy takes the same decisions.
	Policy rollout.Policy
	// Gather is the number of due windows worth one model call when the
	// core is behind: while frames already received wait to be processed
	// (the rest of a message, or the backlog), the windows due at
	// successive bins are gathered, up to Gather of them (and at most
	// MaxGatherBins bins apart), into one Predict call. A predictor that
	// runs a batch's windows in parallel (the engine on T threads, Gather
	// T) then serves the backlog at its full throughput instead of one
	// window at a time. The decisions are the same; only their calls are
	// grouped. 0 or 1: every bin's due windows go to the model at once.
	Gather int
	// WholeCalls sends each model call's decisions together when the call
	// ends.
	//   - Without it, a predictor that hands windows over as it computes
	//     them (rgc.Progressive) has their decisions sent at once.
	//   - With it, each call's decisions are one message (or its
	//     MaxDecisionsPerMsg parts), the same on every instance that sees
	//     the same frames.
	WholeCalls bool
	// Replica makes the core one replica of a hot-standby group: its
	// decisions and their messages depend on the frames alone, never on
	// this instance's timing.
	//   - No gathering: Gather must be 0 or 1.
	//   - No skipping: MaxLag must be 0.
	//   - Whole calls: WholeCalls is implied.
	Replica bool
	// ResendWait is how long the core waits for the frames of a gap once
	// it asked the device for them (Receive; the sink must be a
	// Resender): a gap of up to a window, or one of up to MaxResendGap
	// that wall time covers. The frames after the gap are held meanwhile.
	// 0: gaps are filled at once by holding the last frame, and longer
	// ones are a new numbering.
	ResendWait time.Duration
}

// MaxGatherBins bounds how long a gathered window waits for others: the
// core calls the model once the oldest gathered window is this many bins
// older than the frame being processed.
const MaxGatherBins = 8

// ringBins is the length of the stimulus ring: a window (rgc.WindowBins)
// plus room for windows that end up to MaxGatherBins bins in the past. A
// gathered window's decision can put the cell's next window end at a bin
// already processed (a spike in the next bins); the core then predicts
// that window at once from the ring, as if it had come due on time.
const ringBins = 2 * rgc.WindowBins

// DefaultConfirmFrames is Config.ConfirmFrames' default: 16 frames, 16 ms
// of a real-time stream.
const DefaultConfirmFrames = 16

// DefaultGapSlack is Config.GapSlack's default: 32 bins, the most frames
// a paced device sends in one message when it catches up.
const DefaultGapSlack = 32

// DefaultConfirmWait is Config.ConfirmWait's default: 100 ms, far longer
// than a paced device's pause between messages.
const DefaultConfirmWait = 100 * time.Millisecond

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
	// Restarts counts stream restarts: Config.ConfirmFrames frames of a
	// new numbering (more than rgc.WindowBins bins after the last one, or
	// at least that many behind it) with no frame of the current stream
	// among them.
	Restarts uint64
	// OutOfStream counts frames dropped because they did not continue the
	// current stream and their numbering was not adopted (a second
	// publisher, a stray or forged frame).
	OutOfStream uint64
	// Resets counts the resets applied (OpReset, and OpResetAt at its
	// frame).
	Resets uint64
	// ResetsStale counts OpResetAt messages ignored because they name an
	// epoch that is not the current stream's (it ended, or another reset
	// of the same epoch applied first) or arrive with no stream running.
	ResetsStale uint64
	// ResetsLate counts OpResetAt messages that arrived after their frame
	// was processed: applied at once, at a frame of this core's own.
	ResetsLate uint64
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
	// FilledDecisions counts decisions whose window held gap-filled bins.
	FilledDecisions uint64
	// PredictErrors counts windows whose prediction failed (error, panic or
	// an output that is not a distribution); the cell steps as "no spike".
	PredictErrors uint64
}

// candidate holds the frames of a numbering that does not continue the
// current stream, until it is adopted or a frame of the current stream
// shows the current stream is alive.
type candidate struct {
	n      int
	seqs   []int64
	frames []stream.Frame
}

type pending struct {
	has    bool
	spikes [rgc.WindowBins]bool
}

// gathered is a due window whose input is ready in the batch buffers,
// waiting for its model call: cell index i, window end b, the frame's time
// ts and the decision's flags.
type gathered struct {
	i     int
	b, ts int64
	flags uint8
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

	stim     [rgc.StimChannels][ringBins]float32
	times    [ringBins]int64 // frame time of each bin in the ring
	filledAt [ringBins]int64 // the last gap-filled bin as of each bin in the ring
	stimWin  [rgc.StimChannels * rgc.WindowBins]float32
	winEnd   int64 // the bin whose window stimWin holds, -1 none
	started  bool
	first    int64 // first seq of the stream
	last     int64 // last bin processed
	held     [rgc.StimChannels]float32
	heldT    int64
	filled   int64 // last gap-filled bin of the stream, -1 none
	nextDue  int64 // no cell is due before this bin (0: scan every bin)
	nDue     int   // the cells due at nextDue, when updateNextDue set it
	epoch    uint32
	reason   uint8 // reason of the next start (stream.EventFirst or EventReset)
	resetAt  int64 // a reset of the current stream due before its frame resetAt (OpResetAt), -1 none
	prev     int64 // last bin of the previous stream, -1 none
	cand     candidate
	at       time.Time // arrival of the message being processed (FramesAt), zero unknown
	aliveAt  time.Time // arrival of the current stream's last frame (stale ones too), zero unknown
	sched    schedule  // the current stream's last bin's date on its earliest schedule (wall-time rule)
	credit   int64     // bins of time no gap used, at most GapSlack (allowedGap)

	// The receive edge of the frame being processed (Config.MaxLag).
	cur     int64 // its seq
	rem     int64 // frames after it in its message
	backlog int64 // frames received after its message

	gath    []gathered // windows prepared for the next model call
	late    []int      // cells whose next window ended at a processed bin
	batch   rgc.Batch
	inputs  []float32
	cellBuf []int
	endBuf  []int
	probs   []float32
	due     []int
	out     []stream.Decision
	// The model call whose decisions go to the sink (Call): its windows
	// (0: none), its start and end (zero while it runs), and how many of
	// them are decided; handed is the predictor's done (rgc.Progressive),
	// made once.
	callN              int
	callStart, callEnd time.Time
	decided            int
	handed             func(n int)

	stats   Stats
	lastErr error

	// Gap recovery (Config.ResendWait): the sink as a Resender (nil:
	// off) and the gap waited for.
	resender  Resender
	gw        gapWait
	tail      tailAsk
	resending bool // the frames being processed were resent (release, resentTail)
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
	if cfg.ResendWait < 0 {
		return nil, fmt.Errorf("daemon: negative resend wait %v", cfg.ResendWait)
	}
	if cfg.Replica {
		if cfg.Gather > 1 || cfg.MaxLag > 0 {
			return nil, fmt.Errorf("daemon: a replica neither gathers nor skips: gather %d, max lag %d", cfg.Gather, cfg.MaxLag)
		}
		cfg.WholeCalls = true
	}
	c := &Core{cfg: cfg, pred: p, sink: sink, known: make(map[int]bool, len(cfg.Known)), index: make(map[int]int, len(cfg.Cells))}
	for _, id := range cfg.Known {
		c.known[id] = true
	}
	if missing := rollout.MissingCells(cfg.Known, cfg.Cells); len(missing) > 0 {
		return nil, fmt.Errorf("daemon: cell %d is not in the checkpoint's cells", missing[0])
	}
	for i, id := range cfg.Cells {
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
	var err error
	if c.offset, err = rollout.StartOffsetsByID(cfg.Cells, all, cfg.Stagger); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
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
	c.gath = make([]gathered, 0, mb)
	c.late = make([]int, 0, mb)
	c.winEnd = -1
	c.out = make([]stream.Decision, 0, n)
	c.handed = c.handOver
	if r, ok := sink.(Resender); ok && cfg.ResendWait > 0 {
		c.resender, c.gw = r, newGapWait()
		if queued := cfg.Backlog; queued != nil {
			c.cfg.Backlog = func() int64 { return queued() + c.gw.left }
		}
	}
	if c.cfg.ConfirmFrames <= 0 {
		c.cfg.ConfirmFrames = DefaultConfirmFrames
	}
	if c.cfg.Policy == nil {
		c.cfg.Policy = rollout.Median{}
	}
	if err := rollout.CheckPolicy(c.cfg.Policy, c.cfg.Cells); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if c.cfg.GapSlack <= 0 {
		c.cfg.GapSlack = DefaultGapSlack
	}
	if c.cfg.ConfirmWait <= 0 {
		c.cfg.ConfirmWait = DefaultConfirmWait
	}
	c.cand.seqs = make([]int64, c.cfg.ConfirmFrames)
	c.cand.frames = make([]stream.Frame, c.cfg.ConfirmFrames)
	c.last, c.prev, c.filled, c.resetAt = -1, -1, -1, -1
	c.reason = stream.EventFirst
	return c, nil
}

// Config returns the configuration in force, New's defaults filled in. Its slices are the core's: do not modify them.
func (c *Core) Config() Config { return c.cfg }

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

// Epoch returns the current stream epoch (0 before the first stream).
func (c *Core) Epoch() uint32 { return c.epoch }

// First returns the first seq of the current stream, -1 when none runs.
func (c *Core) First() int64 {
	if !c.started {
		return -1
	}
	return c.first
}

// PendingReset returns the frame before which a reset of the current
// stream (OpResetAt) applies, false when none is pending.
func (c *Core) PendingReset() (int64, bool) { return c.resetAt, c.resetAt >= 0 }

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
