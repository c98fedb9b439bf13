package daemon

import "time"

// ScheduleSpan is the span of the stream's schedule (the wall-time rule):
// its date is set by its most on-time frame of the current span and the
// previous one, the last 15 to 30 s of accepted frames. A late delivery
// (a paused process, a backlog) of up to a span keeps the date the
// on-time frames set; a device clock slower than nominal lends a gap at
// most its lag over two spans.
const ScheduleSpan = 15 * time.Second

// schedule dates the last bin of a stream on the stream's earliest
// schedule: the earliest of the dates its accepted frames give that bin,
// each frame's arrival plus the nominal time of the bins since it. A
// paced device's frames give it the same date, a late one a later date,
// so frames delivered late (all at once after a pause) do not move it
// later than the on-time frames did. It keeps the earliest date of the
// frames of the current span and of the previous span (spans open at
// ScheduleSpan intervals of arrival time), so that a device clock slower
// than nominal does not gather lag for ever. Dates follow arrival times;
// they are no part of the frames' state (Snapshot).
type schedule struct {
	prev, cur time.Time // the last bin's date by the previous and the current span's frames; zero: none
	spanAt    time.Time // arrival of the current span's first frame
}

// known reports whether a frame dated the stream.
func (s *schedule) known() bool { return !s.cur.IsZero() }

// date returns the last bin's date: the earliest the kept frames give.
func (s *schedule) date() time.Time {
	if !s.prev.IsZero() && s.prev.Before(s.cur) {
		return s.prev
	}
	return s.cur
}

// restart dates the last bin at at, forgetting every earlier frame (a
// new stream, or the first frame dated).
func (s *schedule) restart(at time.Time) { s.prev, s.cur, s.spanAt = time.Time{}, at, at }

// advance moves the last bin bins ahead, by a frame that arrived at at:
// the kept dates move by the bins' nominal time, the frame's arrival dates
// the new last bin if earlier, and a span of ScheduleSpan ends.
func (s *schedule) advance(bins int64, period time.Duration, at time.Time) {
	d := time.Duration(bins) * period
	if !s.prev.IsZero() {
		s.prev = s.prev.Add(d)
	}
	s.cur = s.cur.Add(d)
	switch {
	case at.Sub(s.spanAt) >= ScheduleSpan:
		s.prev, s.cur, s.spanAt = s.cur, at, at
	case at.Before(s.cur):
		s.cur = at
	}
}
