package recorder

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/rgc"
	"rgcpred/rollout"
	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// AuditConfig configures Audit.
type AuditConfig struct {
	// Predictor is the model to re-run: the recorded session's checkpoint.
	Predictor rgc.Predictor
	// Core configures the replay core like the recorded daemon (Known,
	// Cells, All, Stagger, PublishSilence, Policy, MaxBatch). MaxLag,
	// Backlog and ConfirmFrames are the replay's own: it never falls
	// behind. With Cells empty the session header's cells, whole list,
	// stagger and silence setting are used (Known: the whole list).
	Core daemon.Config
	// ProbTol is the largest difference between a recorded and a replayed
	// decision's probability that still counts as equal (default 1e-6; a
	// model on other hardware may round differently).
	ProbTol float64
	// MaxMismatches is the number of differences the report lists (default
	// 20); all are counted.
	MaxMismatches int
	// UpKey is the device's Up key (msgauth.DeviceKeys) for a session
	// recorded with message authentication: frames and control messages
	// the daemon refused (stream.Guard) are refused again, not replayed.
	UpKey []byte
	// GroupKey is the hot-standby group's key (msgauth.KeyFile.Groups) for
	// a group's session recorded with message authentication: the
	// holder's reset announcements are admitted under it
	// (stream.Guard.WithGroup); nil: refused, as by a daemon without it.
	GroupKey []byte
	// Precision, when set, is called with the recorded session's
	// arithmetic (Session.Precision) before any decision is replayed, to
	// make Predictor compute the same way; it is not called when the
	// recording has no session header or the header names none.
	Precision func(p string) error
}

// Mismatch is one difference between the recording and the replay.
type Mismatch struct {
	// What: "missing" (recorded, not replayed), "extra" (replayed, not
	// recorded), "differs" (both, not equal) or "event" (stream events
	// differ).
	What string
	// Recorded and Replayed are the decisions (zero when absent).
	Recorded, Replayed stream.Decision
	// Detail says what differs.
	Detail string
}

// Report is an audit's result.
type Report struct {
	// Session is the recorded session header, if any.
	Session *Session
	// FramesMsgs, Frames and Controls count what was replayed.
	FramesMsgs, Frames, Controls uint64
	// SkippedHead counts frames messages recorded before the first stream
	// start in the recording (its head was cut by the stream's limits, or
	// the recording began mid-stream); they are not replayed.
	SkippedHead uint64
	// Recorded and Replayed count the decisions compared on each side;
	// Matched those equal.
	Recorded, Replayed, Matched uint64
	// Skipped counts recorded KindSkipped decisions (overload or model
	// error): the replay steps those cells as "no spike" as the daemon did
	// and does not compare them.
	Skipped uint64
	// Copies counts recorded decisions of a window already recorded: a
	// group's holder publishing a message again (after a takeover, or for
	// a device's resend request, docs/protocol.md "Decisions resend").
	// The first is compared, the copies are not.
	Copies uint64
	// Events counts the recorded stream events compared.
	Events uint64
	// Missing, Extra, Differ and EventDiffs count the differences.
	Missing, Extra, Differ, EventDiffs uint64
	// Holes lists the spans of frames the recording lacks from its first
	// stream start on, after the messages stored again were put back
	// (Filler): frames whose numbering stops and goes on further, with
	// no recorded stream start at the frame it goes on at (a device's
	// jump is one). A gap the daemon filled itself (decisions flagged
	// stream.FlagFilled) reads as a hole too: the recording cannot tell.
	Holes []Hole
	// Segments counts the stretches judged: from the first stream start,
	// and from each recorded stream start after a hole.
	Segments int
	// Unjudged counts recorded decisions not judged: of windows ending at
	// or after a hole's first frame, up to the next recorded stream start
	// (the cells' states there depend on the frames lost).
	Unjudged uint64
	// InHole counts replayed decisions (of windows ending less than a
	// window before a hole) and stream events not recorded, which the
	// daemon would have published while the recording lacked its
	// messages; they are not judged.
	InHole uint64
	// Filled counts the messages a Filler stored again that the replay
	// read (put back in their place); FilledAnswers those of them holding
	// frames a resend answer brought (Msg.Answer), which message keys
	// check over the answer's subject.
	Filled, FilledAnswers uint64
	// Mismatches lists the first differences (AuditConfig.MaxMismatches).
	Mismatches []Mismatch
	// Told counts, by reason, the device messages the daemon refused and
	// told the device of (recorded drop notices, stream.Drop).
	Told map[string]uint64
	// Refused counts, by reason, the recorded frames and control messages
	// the replay refused as the daemon did (malformed, unauthenticated),
	// and the frames its core dropped (out_of_stream, stale): messages the
	// device did not send, or a faulty device.
	Refused map[string]uint64
	// Elapsed is the audit's duration.
	Elapsed time.Duration
}

// Refusals returns the number of messages refused (Told and Refused): not
// zero means someone other than the device published on its subjects, or
// the device is faulty.
func (r *Report) Refusals() uint64 {
	var n uint64
	for _, v := range r.Told {
		n += v
	}
	for _, v := range r.Refused {
		n += v
	}
	return n
}

// Hole is a span of frames a recording lacks: From to To (sequence
// numbers, inclusive); Seq is the stream sequence number of the recorded
// frames message after it.
type Hole struct {
	From, To int64
	Seq      uint64
}

// String describes the hole in a few words.
func (h Hole) String() string {
	return fmt.Sprintf("%d frames from %d (before stream message %d)", h.To-h.From+1, h.From, h.Seq)
}

// Judged reports whether every decision and stream event judged equals
// its replay.
func (r *Report) Judged() bool {
	return r.Missing+r.Extra+r.Differ+r.EventDiffs == 0 && r.Recorded == r.Matched+r.Unjudged
}

// Complete reports whether the recording lacks no frames.
func (r *Report) Complete() bool { return len(r.Holes) == 0 }

// OK reports whether the recording is complete and the replay took
// exactly the recorded decisions.
func (r *Report) OK() bool { return r.Judged() && r.Complete() }

// String summarises the report in a few lines: the verdict, the counts
// and the first differences.
func (r *Report) String() string {
	var b strings.Builder
	verdict := "PASS: the replayed decisions equal the recorded ones"
	switch {
	case !r.Judged():
		verdict = "FAIL: the replay differs from the recording"
	case !r.Complete():
		verdict = fmt.Sprintf("INCOMPLETE: the recording lacks %d spans of frames; the decisions judged equal the recorded ones", len(r.Holes))
	case r.Refusals() > 0:
		verdict = "PASS, but messages were refused (an attack or a faulty publisher): the replayed decisions equal the recorded ones"
	}
	fmt.Fprintf(&b, "audit %s\n", verdict)
	if r.Session != nil {
		prec := r.Session.Precision
		if prec == "" {
			prec = "unrecorded"
		}
		fmt.Fprintf(&b, "session: model %s, %d cells, stagger %v, silence %v, max lag %d, precision %s, started %s\n", r.Session.Model,
			len(r.Session.Cells), r.Session.Stagger, r.Session.PublishSilence, r.Session.MaxLag, prec, r.Session.Started.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "replayed %d frames in %d messages, %d control messages (%d frames messages before the first stream start skipped)\n",
		r.Frames, r.FramesMsgs, r.Controls, r.SkippedHead)
	fmt.Fprintf(&b, "decisions: %d recorded, %d replayed, %d equal, %d differ, %d missing, %d extra; %d skipped by the daemon (not compared)\n",
		r.Recorded, r.Replayed, r.Matched, r.Differ, r.Missing, r.Extra, r.Skipped)
	if r.Copies > 0 {
		fmt.Fprintf(&b, "decisions recorded again (a group's copies, not compared): %d\n", r.Copies)
	}
	if r.Filled > 0 {
		fmt.Fprintf(&b, "messages stored again after the recording lacked them (filled): %d, of them frames a resend answer brought: %d\n", r.Filled, r.FilledAnswers)
	}
	if len(r.Holes) > 0 {
		var frames int64
		for _, h := range r.Holes {
			frames += h.To - h.From + 1
		}
		fmt.Fprintf(&b, "holes: %d, %d frames; %d stretches judged; not judged: %d recorded decisions after a hole, %d replayed decisions and events the holes could hold\n",
			len(r.Holes), frames, r.Segments, r.Unjudged, r.InHole)
		for i, h := range r.Holes {
			if i == 8 {
				fmt.Fprintf(&b, "  ...\n")
				break
			}
			fmt.Fprintf(&b, "  hole: %s\n", h)
		}
	}
	fmt.Fprintf(&b, "stream events: %d compared, %d differ; audit took %v\n", r.Events, r.EventDiffs, r.Elapsed.Round(time.Millisecond))
	if r.Refusals() > 0 {
		fmt.Fprintf(&b, "refused: told to the device %s; by the replay %s\n", byReason(r.Told), byReason(r.Refused))
	}
	for _, m := range r.Mismatches {
		fmt.Fprintf(&b, "  %s: cell %d window %d: %s\n", m.What, max(m.Recorded.Cell, m.Replayed.Cell), max(m.Recorded.End, m.Replayed.End), m.Detail)
	}
	return b.String()
}

// byReason formats counts by reason, sorted.
func byReason(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// ErrEmpty is returned by Audit for a recording without a stream start: no
// stream event with the frames message holding its first frame recorded
// before it, or within aheadFrames frames messages after it.
var ErrEmpty = errors.New("recording holds no stream start")

// key identifies a decision: its stream epoch as recorded (16 bits), cell
// and window end.
type key struct {
	epoch uint16
	cell  int32
	end   int64
}

func keyOf(d *stream.Decision) key { return key{epoch: d.Epoch, cell: d.Cell, end: d.End} }

// Audit replays a recorded session: it reads src twice (a scan for the
// session header, the stream starts, the holes and the skipped
// decisions, then the replay), feeds the frames and control messages from
// the first recorded stream start on to a fresh core with cfg's
// predictor, and compares the decisions and stream events the core takes
// with the recorded ones. Recorded epochs are matched to the replay's by
// their order from that start.
//
// At a hole (Report.Holes) the replay stops judging: the decisions of
// windows ending before the hole's first frame are judged, the recorded
// ones after it are not (Unjudged), and the replayed ones of windows
// ending less than a window before it, which the daemon published while
// the recording lacked its messages, are not either (InHole). It judges
// again from the next recorded stream start, with a fresh core, as at
// the first: a stream start clears every cell's state, so what follows
// does not depend on the frames lost.
func Audit(ctx context.Context, src Source, cfg AuditConfig) (*Report, error) {
	begin := time.Now()
	if cfg.Predictor == nil {
		return nil, errors.New("recorder: audit without a predictor")
	}
	if cfg.ProbTol <= 0 {
		cfg.ProbTol = 1e-6
	}
	if cfg.MaxMismatches <= 0 {
		cfg.MaxMismatches = 20
	}
	sc, err := scan(ctx, src)
	if err != nil {
		return nil, err
	}
	if cfg.Core, err = coreConfig(cfg.Core, sc.session); err != nil {
		return nil, err
	}
	if s := sc.session; cfg.Precision != nil && s != nil && s.Precision != "" {
		if err := cfg.Precision(s.Precision); err != nil {
			return nil, fmt.Errorf("recorder: audit: the recorded session's precision %s: %w", s.Precision, err)
		}
	}
	a := &audit{cfg: cfg, rep: &Report{Session: sc.session, Skipped: uint64(len(sc.skipped)), Told: map[string]uint64{}, Refused: map[string]uint64{}},
		scan: sc, recorded: map[key]stream.Decision{}, replayed: map[key]stream.Decision{}, taken: map[key]struct{}{},
		holes: map[place]Hole{}, starts: map[place]start{}, early: map[place]place{}, deferred: map[place][]stream.Event{}}
	for _, h := range sc.holes {
		a.holes[h.at] = h.Hole
		a.rep.Holes = append(a.rep.Holes, h.Hole)
	}
	for _, st := range sc.starts {
		if _, ok := a.starts[st.frames]; !ok {
			a.starts[st.frames] = st
		}
		if st.early() {
			a.early[st.at] = st.frames
		}
	}
	if cfg.UpKey != nil {
		up, err := stream.NewAuth(cfg.UpKey)
		if err != nil {
			return nil, fmt.Errorf("recorder: audit: %w", err)
		}
		a.guard = stream.NewGuard(up)
		if cfg.GroupKey != nil {
			group, err := stream.NewAuth(cfg.GroupKey)
			if err != nil {
				return nil, fmt.Errorf("recorder: audit: group key: %w", err)
			}
			a.guard.WithGroup(group)
		}
	} else if sc.session != nil && sc.session.Authenticated {
		return nil, errors.New("recorder: audit: the session ran with message authentication: give the device's keys")
	}
	a.fp = &forced{p: cfg.Predictor, skip: sc.skipped, a: a}
	a.seg = sc.starts[0]
	if err := a.newCore(); err != nil {
		return nil, err
	}
	if err := src(ctx, a.msg); err != nil {
		return nil, fmt.Errorf("recorder: audit: %w", err)
	}
	a.countRefused()
	a.finish()
	a.rep.Elapsed = time.Since(begin)
	return a.rep, nil
}

// coreConfig completes c from the session header and checks that they
// agree.
func coreConfig(c daemon.Config, s *Session) (daemon.Config, error) {
	if s == nil {
		if len(c.Cells) == 0 {
			return c, errors.New("recorder: audit: no cells given and no session header recorded")
		}
		return c, nil
	}
	if c.BinPeriod == 0 {
		c.BinPeriod = s.BinPeriod
	}
	if c.Policy == nil && s.Policy != "" {
		p, err := rollout.ParsePolicy(s.Policy)
		if err != nil {
			return c, fmt.Errorf("recorder: audit: the recorded session's policy: %w", err)
		}
		c.Policy = p
	}
	if len(c.Cells) == 0 {
		c.Cells, c.All, c.Stagger, c.PublishSilence = s.Cells, s.All, s.Stagger, s.PublishSilence
		if len(c.Known) == 0 {
			c.Known = slices.Concat(s.All, s.Cells)
			slices.Sort(c.Known)
			c.Known = slices.Compact(c.Known)
		}
		return c, nil
	}
	if !slices.Equal(c.Cells, s.Cells) || c.Stagger != s.Stagger || c.PublishSilence != s.PublishSilence ||
		(len(s.All) > 0 && !slices.Equal(c.All, s.All)) {
		return c, fmt.Errorf("recorder: audit: the replay's cells, stagger or silence setting differ from the recorded session's")
	}
	return c, nil
}

// audit is the replay pass: it is the replay core's sink.
type audit struct {
	cfg  AuditConfig
	rep  *Report
	scan *scanned
	fp   *forced
	// core replays the current stretch, running from seg (not before the
	// first start, nor after a hole until the next start, when a fresh
	// core waits).
	core    *daemon.Core
	running bool
	seg     start
	// trim: the next frames message is the stretch's first, cut to begin
	// at its start's first frame.
	trim bool
	// holes and starts by the place of their frames message; cuts are the
	// stretches ended at a hole.
	holes  map[place]Hole
	starts map[place]start
	cuts   []cut
	// early maps a stream start recorded before its frames message to
	// that message's place; deferred holds, by that place, the starts
	// read before it, taken right after it as the daemon took them.
	early    map[place]place
	deferred map[place][]stream.Event

	guard  *stream.Guard // the daemon's authentication rules (AuditConfig.UpKey), nil off
	frames stream.Frames
	ctl    stream.Control
	ds     stream.Decisions
	ev     stream.Event

	recorded, replayed map[key]stream.Decision
	taken              map[key]struct{} // every recorded decision's window, for Copies
	// Stream events in order, each side's not yet compared.
	recEvents, repEvents []stream.Event
}

// cut is a stretch judged from a recorded start's epoch to a hole: in its
// last epoch, windows ending at or after from are not judged.
type cut struct {
	last   uint16
	from   int64
	resume uint16 // the recorded epoch the next stretch begins at (0: none)
}

// replayEpoch turns a recorded epoch into the current stretch's numbering:
// 0, which no running stream has, for an epoch before the stretch's first.
func (a *audit) replayEpoch(e uint32) uint32 {
	if e < a.seg.ev.Epoch {
		return 0
	}
	return e - a.seg.ev.Epoch + 1
}

// offset turns a replay epoch into the recorded numbering.
func (a *audit) offset(e uint32) uint16 { return uint16(e + a.seg.ev.Epoch - 1) }

// newCore gives the replay a fresh core, waiting for its stretch's start:
// it takes the control messages (histories) recorded before.
func (a *audit) newCore() error {
	cc := a.cfg.Core
	cc.MaxLag, cc.Backlog = 0, nil
	core, err := daemon.New(a.fp, a, cc)
	if err != nil {
		return fmt.Errorf("recorder: audit: %w", err)
	}
	a.core, a.running = core, false
	return nil
}

// begin starts judging a stretch at st.
func (a *audit) begin(st start) {
	a.seg, a.running, a.trim = st, true, true
	a.rep.Segments++
	if n := len(a.cuts); n > 0 && a.cuts[n-1].resume == 0 {
		a.cuts[n-1].resume = uint16(st.ev.Epoch)
	}
}

// countRefused counts the frames the current core refused.
func (a *audit) countRefused() {
	st := a.core.Stats()
	for reason, n := range map[string]uint64{"out_of_stream": st.OutOfStream, "stale": st.Stale} {
		if n > 0 {
			a.rep.Refused[reason] += n
		}
	}
}

// hole ends the current stretch at h: the stream events the core took
// and the recording does not hold may have been lost with it.
func (a *audit) hole(h Hole) error {
	a.cuts = append(a.cuts, cut{last: a.offset(a.core.Epoch()), from: h.From})
	a.rep.InHole += uint64(len(a.repEvents))
	a.repEvents = a.repEvents[:0]
	a.countRefused()
	return a.newCore()
}

func (a *audit) msg(m Msg) error {
	if m.Fill > 0 {
		a.rep.Filled++
		if m.Answer != "" {
			a.rep.FilledAnswers++
		}
	}
	if m.Kind == KindEvent && stream.PayloadType(m.Data) == stream.TypeDrop {
		var d stream.Drop
		if err := stream.DecodeDrop(m.Data, &d); err != nil {
			return fmt.Errorf("drop notice at %d: %w", m.Seq, err)
		}
		a.rep.Told[d.Reason] += d.Count // wherever it is: refusals belong to no stream
		return nil
	}
	at := placeOf(m)
	if at.less(a.scan.starts[0].at) && (m.Kind == KindDecisions || m.Kind == KindEvent) {
		return nil // decisions and events of the streams before the start
	}
	switch m.Kind {
	case KindFrames:
		if err := a.framesMsg(m, at); err != nil {
			return err
		}
		for _, ev := range a.deferred[at] {
			a.event(ev)
		}
		delete(a.deferred, at)
	case KindControl:
		if a.refused(m, true) {
			return nil
		}
		if err := stream.DecodeControl(m.Data, &a.ctl); err != nil {
			a.rep.Refused[stream.Reason(err)]++
			return nil
		}
		if a.ctl.Op == stream.OpResetAt && !a.running {
			return nil // a group's reset of a stream not judged
		}
		a.rep.Controls++
		if a.ctl.Op == stream.OpResetAt {
			a.ctl.Epoch = a.replayEpoch(a.ctl.Epoch)
		}
		a.core.Control(&a.ctl)
	case KindDecisions:
		if err := stream.DecodeDecisions(m.Data, &a.ds); err != nil {
			return fmt.Errorf("decisions at %d: %w", m.Seq, err)
		}
		for _, d := range a.ds.Decisions {
			if d.Kind == stream.KindSkipped {
				continue
			}
			k := keyOf(&d)
			if _, ok := a.taken[k]; ok {
				a.rep.Copies++
				continue
			}
			a.taken[k] = struct{}{}
			a.rep.Recorded++
			if r, ok := a.replayed[k]; ok {
				delete(a.replayed, k)
				a.compare(d, r)
			} else {
				a.recorded[k] = d
			}
		}
	case KindEvent:
		if err := stream.DecodeEvent(m.Data, &a.ev); err != nil {
			return fmt.Errorf("event at %d: %w", m.Seq, err)
		}
		if f, ok := a.early[at]; ok {
			a.deferred[f] = append(a.deferred[f], a.ev)
			return nil
		}
		a.event(a.ev)
	}
	return nil
}

// framesMsg replays a recorded frames message at place at.
func (a *audit) framesMsg(m Msg, at place) error {
	if h, ok := a.holes[at]; ok && a.running {
		if err := a.hole(h); err != nil {
			return err
		}
	}
	if st, ok := a.starts[at]; ok && !a.running && !at.less(a.scan.starts[0].frames) {
		a.begin(st)
	}
	if a.refused(m, false) {
		return nil
	}
	if err := stream.DecodeFrames(m.Data, &a.frames); err != nil {
		a.rep.Refused[stream.Reason(err)]++
		return nil
	}
	if !a.running {
		if a.rep.Segments == 0 {
			a.rep.SkippedHead++
		}
		return nil
	}
	f := &a.frames
	if a.trim {
		first := a.seg.ev.First
		f.Frames = f.Frames[first-f.FirstSeq:]
		f.FirstSeq = first
		a.trim = false
	}
	a.rep.FramesMsgs++
	a.rep.Frames += uint64(len(f.Frames))
	a.core.FramesAt(f, 0, m.Time)
	return nil
}

// event takes a recorded stream event (after its frames message when
// recorded before it) into the comparison.
func (a *audit) event(ev stream.Event) {
	if !a.running {
		a.rep.Unjudged++ // a stream event after a hole, before the next start
		return
	}
	a.recEvents = append(a.recEvents, ev)
	a.compareEvents()
}

// refused applies the daemon's authentication rules (stream.Guard) to a
// recorded frames or control message, counting a refusal. Frames a
// resend answer brought (Msg.Answer) are checked as the daemon checked
// the answer: over its subject, which must name a request whose frames
// hold them (stream.ResendAnswerRange).
func (a *audit) refused(m Msg, control bool) bool {
	subject, data := m.Subject, signed(m)
	if m.Answer != "" && a.guard != nil {
		if control || !answerHolds(m.Answer, data) {
			a.rep.Refused[stream.ReasonAuthInvalid]++
			return true
		}
		subject = m.Answer
	}
	reason := a.guard.Admit(&nats.Msg{Subject: subject, Data: data, Header: m.Header}, control)
	if reason != "" {
		a.rep.Refused[reason]++
	}
	return reason != ""
}

// answerHolds reports whether a resend answer on subject may carry the
// frames of the frames message data.
func answerHolds(subject string, data []byte) bool {
	first, count, ok := stream.ResendAnswerRange(subject)
	f, n, err := stream.PeekFrames(data)
	return ok && err == nil && n > 0 && f >= first && f+int64(n) <= first+int64(count)
}

// Decisions implements daemon.Sink for the replay core.
func (a *audit) Decisions(_ int64, ds []stream.Decision) {
	for _, d := range ds {
		d.Epoch = a.offset(uint32(d.Epoch))
		k := keyOf(&d)
		if a.scan.skipped[k] {
			continue
		}
		a.rep.Replayed++
		if r, ok := a.recorded[k]; ok {
			delete(a.recorded, k)
			a.compare(r, d)
		} else {
			a.replayed[k] = d
		}
	}
}

// Batch implements daemon.Sink.
func (a *audit) Batch(int, time.Duration) {}

// Stream implements daemon.Sink. A stretch's first stream has no
// predecessor in the replay: its reason and previous last frame are the
// recorded ones.
func (a *audit) Stream(ev stream.Event) {
	if ev.Epoch == 1 {
		ev.Reason, ev.PrevLast = a.seg.ev.Reason, a.seg.ev.PrevLast
	}
	ev.Epoch += a.seg.ev.Epoch - 1
	a.repEvents = append(a.repEvents, ev)
	a.compareEvents()
}

// compareEvents compares the stream events both sides have produced.
func (a *audit) compareEvents() {
	n := min(len(a.recEvents), len(a.repEvents))
	for i := range n {
		a.rep.Events++
		if r, p := a.recEvents[i], a.repEvents[i]; r != p {
			a.rep.EventDiffs++
			a.note(Mismatch{What: "event", Detail: fmt.Sprintf("recorded %+v, replayed %+v", r, p)})
		}
	}
	a.recEvents = a.recEvents[:copy(a.recEvents, a.recEvents[n:])]
	a.repEvents = a.repEvents[:copy(a.repEvents, a.repEvents[n:])]
}

// compare checks a recorded decision against the replayed one of the same
// cell, epoch and window.
func (a *audit) compare(rec, rep stream.Decision) {
	var detail string
	switch {
	case rec.Kind != rep.Kind:
		detail = fmt.Sprintf("kind %d, replayed %d", rec.Kind, rep.Kind)
	case rec.Bin != rep.Bin:
		detail = fmt.Sprintf("bin %d, replayed %d", rec.Bin, rep.Bin)
	case rec.Flags != rep.Flags:
		detail = fmt.Sprintf("flags %#x, replayed %#x", rec.Flags, rep.Flags)
	case rec.FrameTime != rep.FrameTime:
		detail = fmt.Sprintf("frame time %d, replayed %d", rec.FrameTime, rep.FrameTime)
	case math.Abs(float64(rec.Prob)-float64(rep.Prob)) > a.cfg.ProbTol:
		detail = fmt.Sprintf("probability %g, replayed %g", rec.Prob, rep.Prob)
	default:
		a.rep.Matched++
		return
	}
	a.rep.Differ++
	a.note(Mismatch{What: "differs", Recorded: rec, Replayed: rep, Detail: detail})
}

// finish counts what one side has and the other has not: a recorded
// decision the replay did not take is missing where it was judged, a
// replayed one not recorded is extra unless a hole could hold it.
func (a *audit) finish() {
	for _, k := range sortedKeys(a.recorded) {
		if !a.judged(k) {
			a.rep.Unjudged++
			continue
		}
		a.rep.Missing++
		a.note(Mismatch{What: "missing", Recorded: a.recorded[k], Detail: "recorded, not replayed"})
	}
	for _, k := range sortedKeys(a.replayed) {
		if a.inHole(k) {
			a.rep.InHole++
			continue
		}
		a.rep.Extra++
		a.note(Mismatch{What: "extra", Replayed: a.replayed[k], Detail: "replayed, not recorded"})
	}
	if n := len(a.recEvents) + len(a.repEvents); n > 0 {
		a.rep.EventDiffs += uint64(n)
		a.note(Mismatch{What: "event", Detail: fmt.Sprintf("%d recorded and %d replayed stream events unmatched", len(a.recEvents), len(a.repEvents))})
	}
}

// judged reports whether a recorded decision lies in a stretch the replay
// judged: not in a stretch's last epoch at or after the hole that ended
// it, nor in the epochs between that hole and the next start.
func (a *audit) judged(k key) bool {
	for _, c := range a.cuts {
		if k.epoch == c.last && k.end >= c.from {
			return false
		}
		if k.epoch > c.last && (c.resume == 0 || k.epoch < c.resume) {
			return false
		}
	}
	return true
}

// inHole reports whether a replayed decision not recorded belongs to a
// stretch's last window before its hole: the daemon published it while
// the recording lacked its messages.
func (a *audit) inHole(k key) bool {
	for _, c := range a.cuts {
		if k.epoch == c.last && k.end >= c.from-rgc.WindowBins {
			return true
		}
	}
	return false
}

func sortedKeys(m map[key]stream.Decision) []key {
	ks := make([]key, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(x, y key) int {
		if x.epoch != y.epoch {
			return int(x.epoch) - int(y.epoch)
		}
		if x.end != y.end {
			return int(min(max(x.end-y.end, -1), 1))
		}
		return int(x.cell - y.cell)
	})
	return ks
}

func (a *audit) note(m Mismatch) {
	if len(a.rep.Mismatches) < a.cfg.MaxMismatches {
		a.rep.Mismatches = append(a.rep.Mismatches, m)
	}
}

// forced runs the audited predictor, but gives the windows the daemon
// skipped a certain "no spike", so the replay's cells step as the daemon's
// did.
type forced struct {
	p    rgc.Predictor
	skip map[key]bool
	a    *audit
}

func (f *forced) Predict(b *rgc.Batch, out []float32) error {
	if err := f.p.Predict(b, out); err != nil {
		return err
	}
	if len(f.skip) == 0 {
		return nil
	}
	e := f.a.offset(f.a.core.Epoch())
	for j := range b.Len() {
		if f.skip[key{epoch: e, cell: int32(b.Cells[j]), end: int64(b.Ends[j])}] {
			row := out[j*rgc.NumClasses : (j+1)*rgc.NumClasses]
			clear(row)
			row[rgc.NoSpikeClass] = 1
		}
	}
	return nil
}
