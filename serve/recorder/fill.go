package recorder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/stream"
)

// FillSubject is the subject on which a device's missing messages are
// stored again (Filler): the recording stream captures it, no daemon or
// device subscribes to it, and a reader (StreamSource) puts each message
// back in its place.
func FillSubject(device string) string { return "rgcrec." + device + ".fill" }

// Headers of a filled message. Its payload and other headers are the
// original's.
const (
	// FillSubjectHeader is the subject the original was published on.
	FillSubjectHeader = "Rgc-Fill-Subject"
	// FillAfterHeader is the stream sequence number of the recorded
	// message the original follows (0: before every message).
	FillAfterHeader = "Rgc-Fill-After"
	// FillOrderHeader orders the messages filled after one recorded
	// message: "FRAME.RANK.N", a frames message's first frame with rank 0,
	// or for another message the last frame received before it with rank
	// 1; N is its number in the filler's log.
	FillOrderHeader = "Rgc-Fill-Order"
	// FillTimeHeader is when the filling instance received the original
	// (Unix ns): the time an audit replays it at.
	FillTimeHeader = "Rgc-Fill-Time"
	// FillAnswerHeader is, for frames a resend answer brought, the
	// answer's subject (a daemon's reply subject): the answer's
	// authenticator, which the fill carries, covers that subject.
	FillAnswerHeader = "Rgc-Fill-Answer"
)

// Fill defaults (FillConfig).
const (
	// FillEvery is how often a filler compares the recording with its log.
	FillEvery = time.Second
	// FillSettle is how old a logged message must be before it is looked
	// for in the recording: the stream stores a message within
	// milliseconds of its publication when it has a leader.
	FillSettle = 2 * time.Second
	// FillStandbySettle is how old a logged message must be before a
	// standby looks for it in the recording.
	FillStandbySettle = 10 * time.Second
	// FillRetry bounds how long a round publishes its filled messages
	// until the stream acknowledges them; the next round tries again.
	FillRetry = 10 * time.Second
	// FillWait bounds each JetStream request of a round (a stream's or a
	// consumer's info, a fetch, a publish and its acknowledgement): a
	// request to a node that died or was cut off fails after it, and the
	// next round starts again from a fresh consumer.
	FillWait = 3 * time.Second
)

// FillConfig configures a Filler.
type FillConfig struct {
	// Stream is the recording stream, Device the device filled.
	Stream, Device string
	// Log holds what this instance received on the device's subjects.
	Log *Log
	// Active reports whether this instance fills; nil: always.
	Active func() bool
	// Holder reports whether this instance publishes (a hot-standby
	// group's lease holder; nil: always): a standby fills too, but only
	// what is older than StandbySettle, so that the holder's fills come
	// first and a standby's only when the holder could not (it lost the
	// lease first, or started after the hole).
	Holder func() bool
	// Every, Settle, StandbySettle, Retry and Wait default to FillEvery,
	// FillSettle, FillStandbySettle, FillRetry, FillWait.
	Every, Settle, StandbySettle, Retry, Wait time.Duration
	// Warn receives errors of a round (nil: none); Filled, the number of
	// messages a round stored again when it stored some (nil: none).
	Warn   func(error)
	Filled func(n int)
}

// FillStats counts a filler's work. Every field only grows.
type FillStats struct {
	// Rounds counts the rounds that read the recording.
	Rounds uint64
	// Filled counts the messages stored again, acknowledged by the stream.
	Filled uint64
	// Lost counts logged messages that left the log before they were
	// checked (a hole older than the log's span, LogKeep): if the
	// recording lacks them, the hole stays.
	Lost uint64
}

// Filler stores again, with acknowledged JetStream publishes on
// FillSubject, the messages of a device that this instance received but
// the recording lacks: a stream electing a leader, or cut off from every
// server, stores nothing of the core NATS messages that pass meanwhile,
// and nobody publishes them again.
//
// Each round (Every) it reads what the stream stored since the last round
// through a consumer on the device's subjects (its first round reads from
// the log's oldest message's time), then looks up in it every logged
// message older than Settle (StandbySettle on a standby) by its subject
// and payload, and fills the missing ones, each placed after the recorded
// message it follows (FillAfterHeader, FillOrderHeader), a window of
// acknowledged publishes at a time (a hole of seconds is thousands of
// messages). Reading back is cheap next to the messages themselves (one
// more copy of small payloads, once) and finds holes of any cause, which
// a position check per subject would not.
type Filler struct {
	js jetstream.JetStream
	// pub publishes the fills: a JetStream context of its own whose
	// asynchronous publishes time out after Retry. nats.go keeps an
	// asynchronous publish pending until its acknowledgement, its timeout
	// or a reconnect, and stalls new ones once fillPending are: one whose
	// acknowledgement never comes (a stream leader that died or was cut
	// off with the message) would hold its place for the connection's life.
	pub jetstream.JetStream
	cfg FillConfig

	was    bool    // active in the last round
	cursor uint64  // the next log entry to check
	next   uint64  // the next stream sequence number to read (0: by time)
	rd     *reader // reads the recording, kept while active
	// after is the furthest place in the recording of the log entries
	// checked (storedAt.anchor).
	after  uint64
	round  uint32
	stored map[uint64]storedAt
	spans  []span // the recorded frames messages, by first frame
	ents   []entry
	plan   []planned

	mu    sync.Mutex
	stats FillStats
}

// storedAt is where a message is in the recording (the sequence number of
// the recorded message it is placed after: its own, or a filled one's
// FillAfterHeader) and the round that found it.
type storedAt struct {
	anchor uint64
	round  uint32
}

// span is a recorded or filled frames message: its frames and the
// stream sequence number a message filled after it is placed after.
type span struct {
	first, last int64
	anchor      uint64
}

// NewFiller returns a filler of cfg over js.
func NewFiller(js jetstream.JetStream, cfg FillConfig) *Filler {
	if cfg.Every <= 0 {
		cfg.Every = FillEvery
	}
	if cfg.Settle <= 0 {
		cfg.Settle = FillSettle
	}
	if cfg.Retry <= 0 {
		cfg.Retry = FillRetry
	}
	if cfg.StandbySettle <= 0 {
		cfg.StandbySettle = max(FillStandbySettle, cfg.Settle)
	}
	if cfg.Wait <= 0 {
		cfg.Wait = FillWait
	}
	pub, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncTimeout(cfg.Retry), jetstream.WithPublishAsyncMaxPending(fillPending))
	if err != nil { // only invalid options fail
		pub = js
	}
	return &Filler{js: js, pub: pub, cfg: cfg}
}

// fillPending bounds a filler's asynchronous publishes awaiting their
// acknowledgement: a window, and the last round's that may still time out.
const fillPending = 4 * fillWindow

// Stats returns the counters.
func (f *Filler) Stats() FillStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Run fills until ctx ends.
func (f *Filler) Run(ctx context.Context) {
	t := time.NewTicker(f.cfg.Every)
	defer t.Stop()
	defer f.drop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := f.Round(ctx); err != nil && ctx.Err() == nil && f.cfg.Warn != nil {
			f.cfg.Warn(err)
		}
	}
}

// keepRounds is how many rounds a recorded message's identity is kept:
// longer than the log's span at FillEvery.
const keepRounds = 120

// maxSpans bounds the frames messages remembered for placing fills.
const maxSpans = LogKeep

// Round runs one round: read, compare, fill. An instance that is not
// active forgets what it read; it starts again from its log's oldest
// message once active.
func (f *Filler) Round(ctx context.Context) error {
	if f.cfg.Active != nil && !f.cfg.Active() {
		f.was = false
		f.drop()
		return nil
	}
	if !f.was {
		oldest, _ := f.cfg.Log.oldest()
		f.cursor = max(f.cursor, oldest)
		f.next, f.stored, f.spans, f.after = 0, map[uint64]storedAt{}, nil, 0
		f.drop()
		f.was = true
	}
	start := time.Now()
	if err := f.read(ctx); err != nil {
		return fmt.Errorf("recorder: fill %s: %w", f.cfg.Device, err)
	}
	f.round++
	f.count(func(s *FillStats) { s.Rounds++ })
	var lost uint64
	settle := f.cfg.Settle
	if f.cfg.Holder != nil && !f.cfg.Holder() {
		settle = f.cfg.StandbySettle
	}
	f.ents, _, lost = f.cfg.Log.since(f.ents[:0], f.cursor, start.Add(-settle).UnixNano())
	if lost > 0 {
		f.cursor += lost
		f.count(func(s *FillStats) { s.Lost += lost })
	}
	f.plan = f.plan[:0]
	for i := range f.ents {
		e := &f.ents[i]
		if st, ok := f.stored[identity(e.subject, e.m.Data)]; ok {
			f.after = max(f.after, st.anchor)
			continue
		}
		anchor := f.place(e)
		f.after = max(f.after, anchor)
		f.plan = append(f.plan, planned{e: e, at: f.cursor + uint64(i), anchor: anchor})
	}
	if failed, err := f.fillAll(ctx); err != nil {
		// The log's entries from the first one not stored on stay for the
		// next round, which reads through a new consumer: the stream's
		// leader or the consumer's node may have changed.
		f.cursor = failed
		f.release()
		f.drop()
		return fmt.Errorf("recorder: fill %s: %w", f.cfg.Device, err)
	}
	if len(f.plan) > 0 && f.cfg.Filled != nil {
		f.cfg.Filled(len(f.plan))
	}
	f.cursor += uint64(len(f.ents))
	f.release()
	f.prune()
	return nil
}

// release drops the references to the logged messages checked.
func (f *Filler) release() {
	clear(f.ents)
	f.ents = f.ents[:0]
	clear(f.plan)
	f.plan = f.plan[:0]
}

func (f *Filler) count(fn func(*FillStats)) {
	f.mu.Lock()
	fn(&f.stats)
	f.mu.Unlock()
}

// read reads what the stream stored since the last round (from the log's
// oldest message's time, less a margin, in a first round) through one
// consumer kept from round to round; a consumer that fails is created
// again from the next sequence number. Each request waits Wait at most.
func (f *Filler) read(ctx context.Context) error {
	if f.rd == nil {
		sctx, cancel := context.WithTimeout(ctx, f.cfg.Wait)
		s, err := f.js.Stream(sctx, f.cfg.Stream)
		cancel()
		if err != nil {
			return err
		}
		cc := jetstream.ConsumerConfig{FilterSubject: DeviceFilter(f.cfg.Device),
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: f.next}
		if f.next == 0 {
			_, at := f.cfg.Log.oldest()
			if at == 0 {
				at = time.Now().UnixNano()
			}
			from := time.Unix(0, at).Add(-readBack)
			cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &from
		}
		if f.rd, err = openReader(ctx, s, cc, f.cfg.Wait); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(readWait)
	for {
		n, done, err := f.rd.fetch(ctx, func(m jetstream.Msg, md *jetstream.MsgMetadata) (bool, error) {
			f.stored1(m.Subject(), m.Headers(), m.Data(), md.Sequence.Stream)
			f.next = md.Sequence.Stream + 1
			return false, nil
		})
		if err != nil {
			f.drop()
			return err
		}
		if done {
			return nil
		}
		if n > 0 {
			continue
		}
		end, err := f.rd.ended(ctx)
		if err != nil {
			f.drop()
			return err
		}
		if end {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the recording read up to %d, more pending", f.next-1)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readWait bounds how long a round waits for the stream's messages
// stored before it began.
const readWait = 5 * time.Second

// drop deletes the filler's consumer (best effort).
func (f *Filler) drop() {
	if f.rd != nil {
		f.rd.close()
	}
	f.rd = nil
}

// readBack is how long before a log's oldest message a first read starts:
// the server's clock and the instance's may differ a little, and a message
// is stored before the instance receives it.
const readBack = 10 * time.Second

// stored1 notes one recorded message.
func (f *Filler) stored1(subject string, h nats.Header, data []byte, seq uint64) {
	anchor := seq
	if subject == FillSubject(f.cfg.Device) {
		subject = h.Get(FillSubjectHeader)
		a, err := strconv.ParseUint(h.Get(FillAfterHeader), 10, 64)
		if err != nil {
			return
		}
		anchor = a
	}
	f.stored[identity(subject, data)] = storedAt{anchor: anchor, round: f.round}
	if anchor == seq && isFrames(subject) {
		if first, n, err := stream.PeekFrames(data); err == nil {
			f.addSpan(span{first: first, last: first + int64(n) - 1, anchor: seq})
		}
	}
}

// place returns the stream sequence number a missing message goes after.
// A frames or control message goes after the recorded frames message
// before its frames (a frames message), or holding the last frame received
// before it (a control message), by frame number, so that it takes its
// place among the frames whichever way it reached this instance (a resend
// answer comes late; those missing after one recorded message are ordered
// by their frames, FillOrderHeader); a frame numbering that went back
// within the log's span may misplace it; a decisions message or stream event goes after the furthest
// place of the logged messages before it (after), so that it stays after
// its stream's start.
func (f *Filler) place(e *entry) uint64 {
	if !isFrames(e.subject) && !strings.HasSuffix(e.subject, ".ctl") && f.after > 0 {
		return f.after
	}
	o := e.order
	// The first recorded frames message starting after the frame (a
	// frames message: at or after its first), then the one before it.
	i := sort.Search(len(f.spans), func(i int) bool {
		if o.rank == 0 {
			return f.spans[i].first >= o.frame
		}
		return f.spans[i].first > o.frame
	})
	if i == 0 {
		return 0
	}
	return f.spans[i-1].anchor
}

// planned is a missing message to fill: its log entry and number, and
// the stream sequence number it goes after.
type planned struct {
	e      *entry
	at     uint64
	anchor uint64
}

// fillWindow is how many filled messages are published before their
// acknowledgements are awaited.
const fillWindow = 256

// fillAll stores the planned messages again on the fill subject, a window
// at a time without waiting for each acknowledgement; one not
// acknowledged is published again until it is. The round gives up after
// Retry in all, publishing included (a stream electing a leader
// acknowledges nothing meanwhile, and a publish may stall while earlier
// ones await their acknowledgement), and returns the log number of the
// first message not stored: the next round reads the recording again and
// goes on from there.
func (f *Filler) fillAll(ctx context.Context) (failed uint64, err error) {
	deadline := time.Now().Add(f.cfg.Retry)
	futs := make([]jetstream.PubAckFuture, 0, fillWindow)
	for lo := 0; lo < len(f.plan); lo += fillWindow {
		win := f.plan[lo:min(lo+fillWindow, len(f.plan))]
		futs = futs[:0]
		for i := range win {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			fut, err := f.pub.PublishMsgAsync(f.msg(&win[i]), jetstream.WithExpectStream(f.cfg.Stream),
				jetstream.WithStallWait(min(left, f.cfg.Wait)))
			if err != nil {
				fut = nil
			}
			futs = append(futs, fut)
		}
		for i := range win {
			var fut jetstream.PubAckFuture
			if i < len(futs) {
				fut = futs[i]
			}
			if !acked(ctx, fut, deadline) {
				if err := f.fillOne(ctx, &win[i], deadline); err != nil {
					return win[i].at, err
				}
			}
			f.stored[identity(win[i].e.subject, win[i].e.m.Data)] = storedAt{anchor: win[i].anchor, round: f.round}
			f.count(func(s *FillStats) { s.Filled++ })
		}
	}
	return 0, nil
}

// acked waits for an asynchronous publish's acknowledgement until
// deadline; one already come counts after the deadline too.
func acked(ctx context.Context, fut jetstream.PubAckFuture, deadline time.Time) bool {
	if fut == nil {
		return false
	}
	select {
	case <-fut.Ok():
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-fut.Ok():
		return true
	case <-fut.Err():
		return false
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
}

// msg is p's message on the fill subject.
func (f *Filler) msg(p *planned) *nats.Msg {
	e := p.e
	m := nats.NewMsg(FillSubject(f.cfg.Device))
	for k, v := range e.m.Header {
		m.Header[k] = v
	}
	m.Data = e.m.Data
	m.Header.Set(FillSubjectHeader, e.subject)
	m.Header.Set(FillAfterHeader, strconv.FormatUint(p.anchor, 10))
	m.Header.Set(FillOrderHeader, fmt.Sprintf("%d.%d.%d", e.order.frame, e.order.rank, e.order.n))
	m.Header.Set(FillTimeHeader, strconv.FormatInt(e.at, 10))
	if e.m.Subject != e.subject {
		m.Header.Set(FillAnswerHeader, e.m.Subject)
	}
	return m
}

// fillOne publishes p until the stream acknowledges it, until deadline,
// each try waiting Wait at most.
func (f *Filler) fillOne(ctx context.Context, p *planned, deadline time.Time) error {
	m := f.msg(p)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("store %s again: not acknowledged within %v", p.e.subject, f.cfg.Retry)
		}
		pctx, cancel := context.WithTimeout(ctx, min(left, f.cfg.Wait))
		_, err := f.pub.PublishMsg(pctx, m, jetstream.WithExpectStream(f.cfg.Stream))
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return fmt.Errorf("store %s again: %w", p.e.subject, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store %s again: %w", p.e.subject, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// addSpan notes a recorded frames message, keeping the spans sorted by
// their first frame (the device's order: an append, but for a numbering
// that went back).
func (f *Filler) addSpan(s span) {
	i := len(f.spans)
	if i > 0 && f.spans[i-1].first > s.first {
		i = sort.Search(len(f.spans), func(j int) bool { return f.spans[j].first > s.first })
	}
	f.spans = slices.Insert(f.spans, i, s)
}

// prune forgets the identities found more than keepRounds rounds ago and
// the oldest frames messages beyond maxSpans.
func (f *Filler) prune() {
	if f.round%16 == 0 {
		for k, v := range f.stored {
			if f.round-v.round > keepRounds {
				delete(f.stored, k)
			}
		}
	}
	if len(f.spans) > maxSpans {
		f.spans = append(f.spans[:0], f.spans[len(f.spans)-maxSpans/2:]...)
	}
}

// parseOrder reads a FillOrderHeader value.
func parseOrder(v string) (fillOrder, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return fillOrder{}, errors.New("malformed " + FillOrderHeader)
	}
	frame, err1 := strconv.ParseInt(parts[0], 10, 64)
	rank, err2 := strconv.ParseUint(parts[1], 10, 8)
	n, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fillOrder{}, fmt.Errorf("malformed %s: %w", FillOrderHeader, err)
	}
	return fillOrder{frame: frame, rank: uint8(rank), n: n}, nil
}
