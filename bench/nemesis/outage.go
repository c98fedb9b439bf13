package nemesis

import (
	"sync"
	"time"

	"rgcpred/bench/history"
	"rgcpred/rgc"
)

// The margins of a declared full outage: a reference decision lost counts
// as lost in the outage (history.Report.LostInOutage) when the device
// published the frame ending its window from OutageBefore before the
// first node was killed to OutageAfter after the last one was restarted.
// Before: a decision in the model's hands when the connections dropped.
// After: the restarted servers recover JetStream and the clients
// reconnect (predictord retries every 250 ms) and resubscribe; frames
// published until then reach nobody (docs/protocol.md, "Outages").
const (
	OutageBefore = 250 * time.Millisecond
	OutageAfter  = 3 * time.Second
)

// frameClock maps wall time to the frame the device published then, from
// the replay's progress reports. It is safe for concurrent use.
type frameClock struct {
	mu     sync.Mutex
	at     []time.Time
	next   []int64 // the next frame to publish at at[i]
	last   int64   // the stretch's last frame
	perSec float64
}

// newFrameClock returns a clock whose first frame after the history,
// first, goes out at start; last is the stretch's last frame.
func newFrameClock(start time.Time, first, last int64) *frameClock {
	return &frameClock{at: []time.Time{start}, next: []int64{first}, last: last, perSec: rgc.BinRateHz}
}

// progress records that next is the next frame to publish at time t.
func (c *frameClock) progress(t time.Time, next int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, t)
	c.next = append(c.next, next)
}

// frame returns the last frame the device published at t: from the last
// report before t on, at the paced rate, up to the next report's frame.
func (c *frameClock) frame(t time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.at) && !c.at[i+1].After(t) {
		i++
	}
	f := c.next[i] - 1 + int64(t.Sub(c.at[i]).Seconds()*c.perSec)
	if i+1 < len(c.at) {
		f = min(f, c.next[i+1]-1)
	}
	return max(min(f, c.last), c.next[0]-1)
}

// outageSpans returns the window ends whose decisions, if lost, are lost
// in a declared outage: for each outage applied (t0: the replay's start),
// the frames published from OutageBefore before it to OutageAfter after
// its end.
func outageSpans(faults []Fault, t0 time.Time, c *frameClock) []history.Span {
	var out []history.Span
	for _, f := range faults {
		if f.Kind != Outage || f.Skipped != "" {
			continue
		}
		out = append(out, history.Span{From: c.frame(t0.Add(f.At - OutageBefore)), To: c.frame(t0.Add(f.Until + OutageAfter))})
	}
	return out
}
