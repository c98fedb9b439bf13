package daemon

import (
	"fmt"
	"math"
	"time"

	"rgcpred/model"
	"rgcpred/rgc"
	"rgcpred/stream"
)

// expectBins is how far ahead, in bins, the core announces the next
// frame's model call to a predictor that can prepare for it (rgc.Expecter):
// the next frame's arrival with a frame of jitter to spare.
const expectBins = 2

// expectWithin is expectBins as a duration.
var expectWithin = binsDuration(expectBins)

// binsDuration returns the duration of n bins at rgc.BinRateHz.
func binsDuration(n float64) time.Duration {
	return time.Duration(n * float64(time.Second) / rgc.BinRateHz)
}

// expect tells a predictor that can prepare for a call (rgc.Expecter) how
// many windows fall due at the next bin, the next frame's model call.
func (c *Core) expect() {
	e, ok := c.pred.(rgc.Expecter)
	if !ok || !c.started {
		return
	}
	if c.nextDue == 0 { // cleared by a (re)start or a history
		c.updateNextDue()
	}
	if c.nextDue == c.last+1 {
		e.Expect(c.nDue, expectWithin)
	}
}

// pollBins is how long, in bins after the last frame's arrival, a caller
// polls for the next frame when it brings a due window (PollFor): the
// frame's period and half of one of jitter.
const pollBins = 1.5

// PollFor returns how long after the last frame's arrival a caller
// waiting for the next frames should poll for them instead of parking
// (service.Config.RealTime): pollBins when the next frame brings a due
// window (or one is overdue), 0 when none is due so soon or no stream
// runs.
func (c *Core) PollFor() time.Duration {
	if !c.started {
		return 0
	}
	if c.nextDue == 0 { // cleared by a (re)start or a history
		c.updateNextDue()
	}
	if c.nextDue > c.last+1 {
		return 0
	}
	return pollWithin
}

// pollWithin is pollBins as a duration.
var pollWithin = binsDuration(pollBins)

// gather prepares cell i's window ending at bin b of the ring (the
// stimulus, the cell's own spikes) for the next model call.
func (c *Core) gather(i int, b int64) {
	if c.winEnd != b {
		// The stimulus rows are the same for every cell: unroll the ring
		// once per window end.
		lo := int((b - rgc.WindowBins + 1) & (ringBins - 1))
		for ch := range c.stim {
			row := c.stimWin[ch*rgc.WindowBins : (ch+1)*rgc.WindowBins]
			n := copy(row, c.stim[ch][lo:])
			copy(row[n:], c.stim[ch][:rgc.WindowBins-n])
		}
		c.winEnd = b
	}
	j := len(c.gath)
	win := c.inputs[j*rgc.WindowLen : (j+1)*rgc.WindowLen]
	copy(win, c.stimWin[:])
	c.cells[i].History.FillRow(win[rgc.SpikeRow*rgc.WindowBins:])
	c.cellBuf[j] = c.cells[i].ID
	c.endBuf[j] = int(b)
	c.gath = append(c.gath, gathered{i: i, b: b, ts: c.times[b&(ringBins-1)], flags: c.flagsAt(b)})
}

// Flush runs the model on the gathered windows (Config.Gather) and sends
// their decisions; windows that fell more than MaxLag bins behind while
// gathered are skipped instead. A decision whose cell's next window ends at
// a bin already processed is followed at once by that window's, until
// every cell's next window lies ahead. The service calls Flush when its
// queue is empty; the core calls it itself before anything that changes a
// cell's state other than its own decisions (control messages, a new
// stream).
func (c *Core) Flush() {
	if len(c.gath) == 0 {
		return
	}
	for len(c.gath) > 0 {
		c.out = c.out[:0]
		c.late = c.late[:0]
		// Skip the stale windows, moving the others' inputs down.
		k := 0
		for j, g := range c.gath {
			if c.stale(g.b) {
				c.stats.DeadlineMisses++
				c.out = append(c.out, c.skipped(g.i, g.b, g.ts, g.flags))
				if int64(c.cells[g.i].Next) <= c.last {
					c.late = append(c.late, g.i)
				}
				continue
			}
			if k != j {
				copy(c.inputs[k*rgc.WindowLen:(k+1)*rgc.WindowLen], c.inputs[j*rgc.WindowLen:(j+1)*rgc.WindowLen])
				c.cellBuf[k], c.endBuf[k] = c.cellBuf[j], c.endBuf[j]
			}
			c.gath[k] = g
			k++
		}
		c.gath = c.gath[:k]
		if k > 0 {
			c.predict()
		}
		for _, g := range c.gath {
			if int64(c.cells[g.i].Next) <= c.last {
				c.late = append(c.late, g.i)
			}
		}
		c.gath = c.gath[:0]
		if len(c.out) > 0 {
			c.sink.Decisions(c.last, c.out)
		}
		c.callN = 0
		for _, i := range c.late {
			c.gather(i, int64(c.cells[i].Next))
		}
	}
	c.updateNextDue()
}

// updateNextDue records the earliest window end of any cell, so that bins
// before it (a gap being filled, most frames) skip the scan for due cells,
// and how many cells it is the window end of (the call expect announces).
func (c *Core) updateNextDue() {
	next, n := int64(math.MaxInt64), 0
	for i := range c.cells {
		switch e := int64(c.cells[i].Next); {
		case e < next:
			next, n = e, 1
		case e == next:
			n++
		}
	}
	c.nextDue, c.nDue = next, n
}

// skip steps the cells as "no spike" without running the model (overload)
// and tells the sink.
func (c *Core) skip(cells []int, b, ts int64, flags uint8) {
	c.out = c.out[:0]
	for _, i := range cells {
		c.out = append(c.out, c.skipped(i, b, ts, flags))
	}
	c.stats.DeadlineMisses += uint64(len(cells))
	c.sink.Decisions(b, c.out)
}

// skipped steps cell i as "no spike" and returns its KindSkipped decision.
func (c *Core) skipped(i int, b, ts int64, flags uint8) stream.Decision {
	next, _ := c.cells[i].Advance(rgc.NoSpikeClass)
	if flags&stream.FlagFilled != 0 {
		c.stats.FilledDecisions++
	}
	return stream.Decision{Cell: int32(c.cells[i].ID), Kind: stream.KindSkipped, Flags: flags,
		Epoch: uint16(c.epoch), End: b, Bin: int64(next), FrameTime: ts}
}

// predict runs the model on the gathered windows and appends their
// decisions to c.out, or sends them as the predictor hands the windows
// over (Config.WholeCalls).
func (c *Core) predict() {
	n := len(c.gath)
	c.batch.Inputs, c.batch.Cells, c.batch.Ends = c.inputs[:n*rgc.WindowLen], c.cellBuf[:n], c.endBuf[:n]
	c.callN, c.callStart, c.callEnd, c.decided = n, time.Now(), time.Time{}, 0
	err := c.safePredict(c.probs[:n*rgc.NumClasses])
	c.callEnd = time.Now()
	c.sink.Batch(n, c.callEnd.Sub(c.callStart))
	if err != nil {
		c.lastErr = err
		c.stats.PredictErrors += uint64(n - c.decided)
		for _, g := range c.gath[c.decided:] {
			c.out = append(c.out, c.skipped(g.i, g.b, g.ts, g.flags|stream.FlagModelError))
		}
		return
	}
	c.decide(n)
}

// Call returns, for the sink's Decisions, the model call that took the
// decisions it is given: its number of windows, its start and its end, end
// zero while the call runs (decisions handed over during it,
// rgc.Progressive). n is 0 for decisions taken without a call (skipped
// under overload).
func (c *Core) Call() (n int, start, end time.Time) {
	return c.callN, c.callStart, c.callEnd
}

// handOver is the progressive predictor's done: windows 0..n-1 of the call
// are final, and their decisions go out now, after any taken before the
// call (skipped windows).
func (c *Core) handOver(n int) {
	n = min(n, len(c.gath))
	c.decide(n)
	if len(c.out) > 0 {
		c.sink.Decisions(c.last, c.out)
		c.out = c.out[:0]
	}
}

// decide steps the cells of the call's windows c.decided..n-1 on their
// probabilities and appends their decisions to c.out.
func (c *Core) decide(n int) {
	for j := c.decided; j < n; j++ {
		g := c.gath[j]
		i := g.i
		row := c.probs[j*rgc.NumClasses : (j+1)*rgc.NumClasses]
		if err := model.CheckDist(row); err != nil {
			c.lastErr = fmt.Errorf("daemon: cell %d window %d: %w", c.cells[i].ID, g.b, err)
			c.stats.PredictErrors++
			c.out = append(c.out, c.skipped(i, g.b, g.ts, g.flags|stream.FlagModelError))
			continue
		}
		k := c.cfg.Policy.Choose(c.cells[i].ID, int(g.b), row)
		next, spike := c.cells[i].Advance(k)
		c.stats.Predictions++
		d := stream.Decision{Cell: int32(c.cells[i].ID), Flags: g.flags, Epoch: uint16(c.epoch), End: g.b, Bin: int64(next),
			Prob: min(max(row[k], 0), 1), FrameTime: g.ts}
		switch {
		case spike:
			c.stats.Spikes++
			d.Kind = stream.KindSpike
		case c.cfg.PublishSilence:
			d.Kind = stream.KindSilence
		default:
			continue
		}
		if g.flags&stream.FlagFilled != 0 {
			c.stats.FilledDecisions++
		}
		c.out = append(c.out, d)
	}
	c.decided = max(c.decided, n)
}

// safePredict runs the predictor, turning a panic into an error.
func (c *Core) safePredict(out []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("daemon: predictor panicked: %v", r)
		}
	}()
	if p, ok := c.pred.(rgc.Progressive); ok && !c.cfg.WholeCalls {
		return p.PredictEach(&c.batch, out, c.handed)
	}
	return c.pred.Predict(&c.batch, out)
}
