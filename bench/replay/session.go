package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/bench/history"
	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/stream"
)

// Config describes one replay of a stretch of a recording to a daemon.
type Config struct {
	// Rec is the recording whose stimulus is played.
	Rec *rgc.Recording
	// From and To delimit the stretch [From, To) in recording bins. Its
	// first rgc.WindowBins bins are the history: their frames are sent at
	// once, and each cell starts with its recorded spikes there, as the
	// offline rollout does (rollout.Run); the first prediction is for the
	// window ending at From+1023, or later when the daemon staggers the
	// starts (the replay learns its rule from the status reply).
	From, To int
	// Cells are the cluster ids to replay.
	Cells []int
	// Speed is the pacing: 1 plays at 991.82 frames per second against the
	// wall clock, N at N times that. 0 plays as fast as the daemon takes it
	// (see Run for the flow control).
	Speed float64
	// Clock is the pacing clock; nil means SystemClock.
	Clock Clock
	// MaxFramesPerMsg bounds the frames of one message when a paced replay
	// catches up after a late wake-up (default 32).
	MaxFramesPerMsg int
	// DecisionTimeout bounds the wait for an outstanding decision (the
	// unpaced replay's flow control and the final drain); default 10 s.
	DecisionTimeout time.Duration
	// Progress, if not nil, is called about once a second with the number of
	// frames sent and the total.
	Progress func(sent, total int)
	// OnDecision, if not nil, hears every decision of a replayed cell whose
	// latency is sampled (Result.Samples): its cell and window end, when the
	// frame at End was published and when the decision arrived. It runs on
	// the NATS delivery goroutine and must return quickly.
	OnDecision func(cell int32, end int64, sent, received time.Time)
	// History, if not nil, records every decision taken (after the fence,
	// in arrival order) and every decisions message published on the
	// device's subject by lease revision (package history checks it).
	History *history.Log
}

// Result is the outcome of a replay.
type Result struct {
	// First is From+1023, the end bin of every cell's first window without
	// stagger; the predicted trains cover [First+1, To), the bins
	// rollout.Run compares.
	First, To int
	// Stagger is the daemon's start rule (from its status): Starts[i] is
	// the end bin of Cells[i]'s first window, First + rollout.StartOffset
	// of its index in the daemon's whole cell list (First without
	// stagger). Compare with rollout.Run with Options.Stagger equal to it.
	Stagger bool
	Starts  []int
	// Cells are the replayed cluster ids; Spikes[i] holds the bins of the
	// predicted spikes of Cells[i] inside [First+1, To), ascending, after
	// the recorded spikes of bins First+1..Starts[i] (the cell's history),
	// as rollout.Run's generated trains hold them.
	Cells  []int
	Spikes [][]int
	// LateBins[i] holds the bins of Cells[i]'s predicted spikes that arrived
	// after their bin was due (a subset of Spikes[i]; paced replays only).
	LateBins [][]int
	// Decisions is the number of decisions received for the replayed cells
	// (spikes, silences and skipped windows); Windows[i] those of cell i.
	Decisions int64
	Windows   []int
	// Foreign counts decisions for cells not replayed (the daemon serves
	// more); Stale counts repeated or out-of-date decisions and decisions
	// of another stream epoch (ignored); Skipped counts the windows the
	// daemon said it skipped (stream.KindSkipped: overload or a model
	// error; the cell stepped as "no spike"); Gaps counts the places where
	// a cell's chain of decisions jumped past its expected window with no
	// decision for it, or ended before the stretch's last bin. Lost is the
	// fewest decisions those gaps hide (history.LostAtLeast: a decision
	// moves a cell at most rgc.Horizon bins on); the exact count needs the
	// undisturbed rollout (history.Check).
	Foreign, Stale, Skipped, Gaps, Lost int64
	// DaemonSkipped and DaemonRejected are what the daemon's status
	// counted for the device during the replay (skipped decisions;
	// rejected messages, frames and histories), -1 when it could not be
	// asked. DaemonSkipped above Skipped means skipped decisions were lost
	// on the way.
	DaemonSkipped, DaemonRejected int64
	// Epoch is the daemon's stream epoch of the replay (low 16 bits on
	// the wire).
	Epoch uint32
	// Missing counts cells whose last expected decision never came.
	Missing int
	// Latency is the frame-to-decision latency: from publishing the frame
	// that completed a window to receiving the decision for it, on this
	// process's monotonic clock. Samples holds it per decision.
	Latency DurationSummary
	Samples Durations `json:"-"`
	// LateDecisions counts late decisions: received after the end of
	// their prediction period (frame End+rgc.Horizon was due), so the
	// device had no prediction for part of it (docs/operations.md, a
	// skipped decision is the other kind of missed deadline). Only defined
	// when paced.
	LateDecisions int64
	// Late is the late-spike account (only defined when paced);
	// LateSamples holds the lateness of each late spike.
	Late        LateSummary
	LateSamples Durations `json:"-"`
	// Pace reports how late the frames left (paced replays).
	Pace PaceStats
	// Frames is the number of frames sent; Wall the replay's duration from
	// the first frame to the last frame or decision, whichever came later.
	Frames int64
	Wall   time.Duration
	// Speed is the pacing (0: as fast as possible).
	Speed float64
}

// cellState is the device-side view of one cell: the window end of the
// next expected decision and the predicted spikes so far.
type cellState struct {
	idx     int
	next    int64
	spikes  []int
	late    []int
	windows int
}

// session holds a replay in progress.
type session struct {
	cfg   Config
	pub   *stream.Publisher
	first int64 // end bin of the first window
	last  int64 // last bin of the stretch (To-1)
	t0    time.Time
	pacer *Pacer

	pubNs []atomic.Int64 // publish time (ns since t0) of frame From+i

	mu     sync.Mutex
	cells  map[int32]*cellState
	res    *Result
	late   *LateTracker
	notify chan struct{}
	lastRx time.Time
	lastTx time.Duration // publish time of the last frame, since t0
}

// Run replays cfg's stretch through the daemon serving pub's device and
// collects the predicted spikes.
//
// Order:
//  1. a reset of the device, so that a previous replay's state does not
//     linger;
//  2. the recorded spike history of every cell on the control subject;
//  3. the history frames From..From+1022 at once;
//  4. from frame From+1023 on, the frames paced. With Speed > 0 frame
//     From+1023+i is due at start + i/(991.82 Hz * Speed) (absolute
//     deadlines, no drift). With Speed 0 the replay runs as fast as
//     possible under flow control: it sends frames up to the earliest
//     window end any cell still waits for, then waits for that window's
//     decisions before sending more.
//
// With Speed 0 the daemon never has more than one outstanding window per
// cell and never falls behind, so every decision sees the same inputs as the
// offline rollout.
func Run(ctx context.Context, pub *stream.Publisher, cfg Config) (*Result, error) {
	if cfg.Rec == nil {
		return nil, errors.New("replay: no recording")
	}
	if cfg.From < 0 || cfg.To > cfg.Rec.Bins || cfg.To-cfg.From < rgc.WindowBins+1 {
		return nil, fmt.Errorf("replay: stretch %d..%d of %s (%d bins) cannot hold a %d-bin window and a step", cfg.From, cfg.To, cfg.Rec.Name, cfg.Rec.Bins, rgc.WindowBins)
	}
	if len(cfg.Cells) == 0 {
		return nil, errors.New("replay: no cells")
	}
	if cfg.Speed < 0 {
		return nil, fmt.Errorf("replay: speed %v must be positive (or 0 for as fast as possible)", cfg.Speed)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.MaxFramesPerMsg <= 0 {
		cfg.MaxFramesPerMsg = 32
	}
	cfg.MaxFramesPerMsg = min(cfg.MaxFramesPerMsg, stream.MaxFramesPerMsg)
	if cfg.DecisionTimeout <= 0 {
		cfg.DecisionTimeout = 10 * time.Second
	}
	// The device keeps what it sends and resends a daemon's gap on request
	// (docs/protocol.md, "Resend").
	if err := pub.ServeResend(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	s := &session{
		cfg:    cfg,
		pub:    pub,
		first:  int64(cfg.From + rgc.WindowBins - 1),
		last:   int64(cfg.To - 1),
		pubNs:  make([]atomic.Int64, cfg.To-cfg.From),
		cells:  make(map[int32]*cellState, len(cfg.Cells)),
		notify: make(chan struct{}, 1),
		res: &Result{
			First: cfg.From + rgc.WindowBins - 1, To: cfg.To,
			Starts:   make([]int, len(cfg.Cells)),
			Cells:    slices.Clone(cfg.Cells),
			Spikes:   make([][]int, len(cfg.Cells)),
			LateBins: make([][]int, len(cfg.Cells)),
			Windows:  make([]int, len(cfg.Cells)),
			Speed:    cfg.Speed,
		},
	}
	// The daemon's start rule and the cells' places in its whole list fix
	// each cell's first window (rollout.StartOffset).
	st, err := s.status(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.checkServed(st); err != nil {
		return nil, err
	}
	if err := rgc.CheckStimMode(st.StimMode, cfg.Rec.StimMode); err != nil {
		return nil, fmt.Errorf("replay: the daemon expects other frames than the recording's (its status): %w", err)
	}
	offsets, err := s.startOffsets(st)
	if err != nil {
		return nil, err
	}
	s.res.Stagger = st.Stagger
	hist := make([]stream.History, len(cfg.Cells))
	for i, id := range cfg.Cells {
		ci, ok := cfg.Rec.CellIndex(id)
		if !ok {
			return nil, fmt.Errorf("replay: recording %s has no cluster %d", cfg.Rec.Name, id)
		}
		if id < 0 || id > stream.MaxCellID {
			return nil, fmt.Errorf("replay: cluster id %d outside 0..%d", id, stream.MaxCellID)
		}
		if _, dup := s.cells[int32(id)]; dup {
			return nil, fmt.Errorf("replay: cluster %d listed twice", id)
		}
		start := s.first + int64(offsets[id])
		s.res.Starts[i] = int(start)
		cs := &cellState{idx: i, next: start}
		// The recorded history after First belongs to the predicted train,
		// as in rollout.Run under stagger.
		for b := range rollout.HistoryBins(cfg.Rec.Cells[ci].SpikeBins, int(s.first)+1, int(min(start, s.last))) {
			cs.spikes = append(cs.spikes, b)
		}
		s.cells[int32(id)] = cs
		hist[i].Cell = int32(id)
		rollout.HistoryRow(&hist[i].Spikes, cfg.Rec.Cells[ci].SpikeBins, int(start))
	}

	sub, err := pub.SubscribeDecisions(s.onDecisions)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer sub.Unsubscribe()
	if cfg.History != nil {
		raw, err := pub.Conn().Subscribe(stream.SpikesSubject(pub.Device()), cfg.History.Publish)
		if err != nil {
			return nil, fmt.Errorf("replay: subscribe to the published decisions: %w", err)
		}
		defer raw.Unsubscribe()
	}
	if err := pub.Reset(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := pub.SendHistory(hist); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = pub.Flush(fctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	// A status round trip orders the reset and histories before the frames
	// on the daemon's side.
	st0, err := s.status(ctx)
	if err != nil {
		return nil, err
	}
	s.res.Epoch = st0.Epoch + 1 // the first frame starts a new stream

	s.t0 = time.Now()
	if cfg.Speed > 0 {
		err = s.runPaced(ctx)
	} else {
		err = s.runFlow(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := s.drain(ctx); err != nil {
		return nil, err
	}
	res := s.finish()
	res.DaemonSkipped, res.DaemonRejected = -1, -1
	if st1, err := s.status(ctx); err == nil {
		res.DaemonSkipped = int64(st1.Skipped - st0.Skipped)
		res.DaemonRejected = int64(st1.Rejected - st0.Rejected)
	}
	return res, nil
}

// status asks the daemon for its status.
func (s *session) status(ctx context.Context) (*stream.Status, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := s.pub.Status(sctx)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("replay: no daemon serves device %s (is predictord running on this NATS server?): %w", s.pub.Device(), err)
		}
		return nil, fmt.Errorf("replay: %w", err)
	}
	return st, nil
}

// startOffsets returns each replayed cell's stagger offset (cluster id ->
// bins after First) under the daemon's start rule: rollout.StartOffset of
// the cell's index in the daemon's whole cell list, all 0 without stagger.
// With stagger it fails for a cell the answering shard does not serve (its
// index is unknown): replay each shard's cells separately.
func (s *session) startOffsets(st *stream.Status) (map[int]int, error) {
	out := make(map[int]int, len(s.cfg.Cells))
	if !st.Stagger {
		return out, nil
	}
	if st.Total == 0 {
		return nil, fmt.Errorf("replay: the daemon on device %s staggers its cells but does not say how many it has", s.pub.Device())
	}
	idx := make([]int, len(st.Cells))
	for k := range st.Cells {
		idx[k] = st.Index(k)
	}
	for k, o := range rollout.StartOffsets(idx, int(st.Total), true) {
		out[int(st.Cells[k])] = o
	}
	for _, id := range s.cfg.Cells {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("replay: cell %d: the answering daemon (shard %d/%d) does not serve it and staggers its starts, so its first window is unknown; replay each shard's cells (--cells) separately", id, st.Shard, st.Shards)
		}
	}
	return out, nil
}

// checkServed fails when the daemon does not serve every replayed cell.
func (s *session) checkServed(st *stream.Status) error {
	served := make(map[int32]bool, len(st.Cells))
	for _, c := range st.Cells {
		served[c] = true
	}
	var missing []int
	for _, id := range s.cfg.Cells {
		if !served[int32(id)] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 && st.Shards <= 1 {
		return fmt.Errorf("replay: the daemon on device %s does not serve cells %v (it serves %d cells)", s.pub.Device(), missing, len(st.Cells))
	}
	return nil
}

// publish sends frames [lo, hi) (recording bins) in messages of at most
// maxN frames, stamping each frame's publish time.
func (s *session) publish(lo, hi int64, maxN int, f *stream.Frames) error {
	for lo < hi {
		n := min(hi-lo, int64(maxN))
		f.FirstSeq = lo
		f.Frames = f.Frames[:n]
		now := time.Since(s.t0)
		wall := s.t0.Add(now).UnixNano()
		for i := range f.Frames {
			b := int(lo) + i
			fr := &f.Frames[i]
			fr.Time = wall
			for c := range fr.LED {
				fr.LED[c] = s.cfg.Rec.Stimulus[c][b]
			}
			s.pubNs[b-s.cfg.From].Store(max(int64(now), 1))
		}
		if err := s.pub.PublishFrames(f); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		s.res.Frames += n
		s.lastTx = now
		lo += n
	}
	return nil
}

// runPaced sends the history frames at once, then the rest against the
// pacer.
func (s *session) runPaced(ctx context.Context) error {
	f := &stream.Frames{Frames: make([]stream.Frame, stream.MaxFramesPerMsg)}
	if err := s.publish(int64(s.cfg.From), s.first, stream.MaxFramesPerMsg, f); err != nil {
		return err
	}
	undo := PrepareThread()
	defer undo()
	p, err := NewPacer(s.cfg.Clock, s.cfg.Clock.Now(), s.cfg.Speed)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	s.mu.Lock()
	s.pacer = p
	s.late = NewLateTracker(p)
	s.mu.Unlock()
	total := s.cfg.To - s.cfg.From
	nextReport := time.Now().Add(time.Second)
	st, err := p.Run(ctx, 0, s.last-s.first+1, s.cfg.MaxFramesPerMsg, func(lo, hi int64, _ time.Time) error {
		if err := s.publish(s.first+lo, s.first+hi, s.cfg.MaxFramesPerMsg, f); err != nil {
			return err
		}
		if s.cfg.Progress != nil && time.Now().After(nextReport) {
			nextReport = nextReport.Add(time.Second)
			s.cfg.Progress(int(s.first+hi)-s.cfg.From, total)
		}
		return nil
	})
	s.res.Pace = st
	return err
}

// minNext returns the earliest window end a cell still waits for, or -1
// when every cell is done (its next window ends at or after the stretch's
// last bin, where the offline rollout stops too). Callers hold s.mu.
func (s *session) minNext() int64 {
	m := int64(-1)
	for _, c := range s.cells {
		if c.next < s.last && (m < 0 || c.next < m) {
			m = c.next
		}
	}
	return m
}

// runFlow sends frames as fast as the daemon decides: up to the earliest
// outstanding window end, then waits for its decisions.
func (s *session) runFlow(ctx context.Context) error {
	s.late = NewLateTracker(nil)
	f := &stream.Frames{Frames: make([]stream.Frame, stream.MaxFramesPerMsg)}
	sent := int64(s.cfg.From)
	end := int64(s.cfg.To)
	total := s.cfg.To - s.cfg.From
	nextReport := time.Now().Add(time.Second)
	for sent < end {
		s.mu.Lock()
		lim := s.minNext()
		s.mu.Unlock()
		hi := end
		if lim >= 0 {
			hi = min(lim+1, end)
		}
		if sent < hi {
			if err := s.publish(sent, hi, stream.MaxFramesPerMsg, f); err != nil {
				return err
			}
			sent = hi
			if s.cfg.Progress != nil && time.Now().After(nextReport) {
				nextReport = nextReport.Add(time.Second)
				s.cfg.Progress(int(sent)-s.cfg.From, total)
			}
			continue
		}
		if err := s.waitUntil(ctx, func() bool { m := s.minNext(); return m < 0 || m > lim }); err != nil {
			return fmt.Errorf("replay: waiting for the decisions at bin %d: %w", lim, err)
		}
	}
	return nil
}

// waitUntil waits until cond (called with s.mu held) holds, a decision
// timeout passes without any decision arriving, or ctx ends.
func (s *session) waitUntil(ctx context.Context, cond func() bool) error {
	timer := time.NewTimer(s.cfg.DecisionTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return s.timeoutError()
		case <-s.notify:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(s.cfg.DecisionTimeout)
		}
	}
}

func (s *session) timeoutError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var waiting []string
	for id, c := range s.cells {
		if c.next < s.last && len(waiting) < 8 {
			waiting = append(waiting, fmt.Sprintf("cell %d at bin %d", id, c.next))
		}
	}
	slices.Sort(waiting)
	return fmt.Errorf("no decision for %v within %v (does the daemon serve these cells?)", waiting, s.cfg.DecisionTimeout)
}

// drain waits for the decisions of windows already sent; cells still
// waiting after the timeout are counted as missing.
func (s *session) drain(ctx context.Context) error {
	err := s.waitUntil(ctx, func() bool { return s.minNext() < 0 })
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("replay: draining decisions: %w", err)
	}
	return nil
}

// onDecisions handles one decisions message (NATS delivery goroutine).
func (s *session) onDecisions(d *stream.Decisions, err error) {
	rx := time.Since(s.t0)
	if err != nil {
		return
	}
	if s.cfg.History != nil {
		s.cfg.History.Receive(d.Decisions)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastRx = s.t0.Add(rx)
	for i := range d.Decisions {
		x := &d.Decisions[i]
		c, ok := s.cells[x.Cell]
		if !ok {
			s.res.Foreign++
			continue
		}
		if x.End < c.next || x.Epoch != uint16(s.res.Epoch) {
			s.res.Stale++
			continue
		}
		if x.End > c.next {
			s.res.Gaps++
			s.res.Lost += history.LostAtLeast(x.End - c.next)
		}
		if x.Kind == stream.KindSkipped {
			s.res.Skipped++
		}
		s.res.Decisions++
		c.windows++
		c.next = x.Bin // spike: the next window ends at the spike; silence: at End+Horizon
		if x.End >= int64(s.cfg.From) && x.End < int64(s.cfg.To) {
			if pn := s.pubNs[x.End-int64(s.cfg.From)].Load(); pn > 0 {
				s.res.Samples.Add(rx - time.Duration(pn))
				if s.cfg.OnDecision != nil {
					s.cfg.OnDecision(x.Cell, x.End, s.t0.Add(time.Duration(pn)), s.t0.Add(rx))
				}
			}
		}
		if s.pacer != nil {
			arrived := s.t0.Add(rx)
			if arrived.After(s.pacer.Due(x.End + rgc.Horizon - s.first)) {
				s.res.LateDecisions++
			}
		}
		if x.Kind == stream.KindSpike && x.Bin <= s.last {
			c.spikes = append(c.spikes, int(x.Bin))
			if s.late != nil {
				if late, _ := s.late.Spike(x.Bin-s.first, s.t0.Add(rx)); late {
					c.late = append(c.late, int(x.Bin))
				}
			}
		}
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// finish assembles the result.
func (s *session) finish() *Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res
	for _, c := range s.cells {
		r.Spikes[c.idx] = c.spikes
		r.LateBins[c.idx] = c.late
		r.Windows[c.idx] = c.windows
		if c.next < s.last {
			r.Missing++
			r.Gaps++
			r.Lost += history.LostAtLeast(s.last - c.next)
		}
	}
	if s.late != nil {
		r.Late = s.late.Summary()
		r.LateSamples.Merge(s.late.Lateness())
	}
	r.Latency = r.Samples.Summary()
	r.Wall = s.lastTx
	if !s.lastRx.IsZero() {
		r.Wall = max(r.Wall, s.lastRx.Sub(s.t0))
	}
	return r
}
