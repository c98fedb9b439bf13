package recorder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"rgcpred/stream"
)

// Kind is what a recorded message is.
type Kind uint8

// Kinds of recorded messages.
const (
	KindFrames Kind = iota + 1
	KindControl
	KindDecisions
	KindEvent
	KindSession
)

// Msg is one recorded message.
type Msg struct {
	// Kind tells what Data encodes (stream's wire format, or a JSON
	// Session).
	Kind Kind
	// Seq is the stream sequence number, Time when the server stored it.
	// A message a Filler stored again has Fill > 0: it is the Fill-th
	// put back after the recorded message Seq (0: before every message),
	// and Time is when the filling instance received it.
	Seq  uint64
	Fill uint32
	Time time.Time
	// Data is the payload; it is valid only during the callback.
	Data []byte
	// Subject is the subject the message was published on.
	Subject string
	// Header is the message's header (authenticators: stream.AuthHeader),
	// nil for none.
	Header nats.Header
	// Answer is, for a filled frames message that a resend answer
	// brought, the answer's subject, which its authenticator covers
	// instead of Subject ("" otherwise: FillAnswerHeader).
	Answer string
	// Signed is the payload the authenticator covers when the frames
	// read already were cut from Data's head (Merge), nil otherwise.
	Signed []byte
}

// Source yields one device's recorded messages in recording order, calling
// fn for each until fn returns an error (which Source returns) or the
// messages end. Every call starts again at the first message.
type Source func(ctx context.Context, fn func(Msg) error) error

// StreamSource returns the Source of device's messages in the recording
// stream name: a consumer over the device's subjects reading the
// messages stored when the call began, with the messages a Filler stored
// again put back in their place (Merge; a first consumer reads those on
// FillSubject). Each consumer has one filter subject, so it works on
// every JetStream server (nats-server 2.9 takes no more than one).
func StreamSource(js jetstream.JetStream, name, device string) Source {
	kinds := kindsOf(device)
	fillSubj := FillSubject(device)
	return func(ctx context.Context, fn func(Msg) error) error {
		ictx, cancel := context.WithTimeout(ctx, apiWait)
		defer cancel()
		s, err := js.Stream(ictx, name)
		if err != nil {
			return fmt.Errorf("recorder: stream %s: %w", name, err)
		}
		info, err := s.Info(ictx)
		if err != nil {
			return fmt.Errorf("recorder: stream %s: %w", name, err)
		}
		last := info.State.LastSeq
		if info.State.Msgs == 0 {
			return nil
		}
		mg := newMerger(device)
		err = readStream(ctx, s, fillSubj, last,
			func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
				mg.add(Msg{Seq: md.Sequence.Stream, Time: md.Timestamp, Data: m.Data(), Subject: m.Subject(), Header: m.Headers()})
				return nil
			})
		if err != nil {
			return fmt.Errorf("recorder: read %s: %w", name, err)
		}
		mg.sort()
		if len(mg.fills) > 0 {
			err = readStream(ctx, s, DeviceFilter(device), last, func(m jetstream.Msg, _ *jetstream.MsgMetadata) error {
				if m.Subject() != fillSubj {
					mg.mark(Msg{Subject: m.Subject(), Data: m.Data()})
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("recorder: read %s: %w", name, err)
			}
		}
		err = readStream(ctx, s, DeviceFilter(device), last,
			func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
				if k, ok := kinds[m.Subject()]; ok {
					return mg.recorded(Msg{Kind: k, Seq: md.Sequence.Stream, Time: md.Timestamp, Data: m.Data(), Subject: m.Subject(), Header: m.Headers()}, fn)
				}
				return nil
			})
		if err != nil {
			var ferr fnError
			if errors.As(err, &ferr) {
				return ferr.err
			}
			return fmt.Errorf("recorder: read %s: %w", name, err)
		}
		return mg.end(fn)
	}
}

// kindsOf maps a device's recorded subjects to their kinds (the fill
// subject has none: its messages take their original's).
func kindsOf(device string) map[string]Kind {
	return map[string]Kind{
		stream.StimSubject(device):    KindFrames,
		stream.ControlSubject(device): KindControl,
		stream.SpikesSubject(device):  KindDecisions,
		stream.EventsSubject(device):  KindEvent,
		SessionSubject(device):        KindSession,
	}
}

// fnError carries a Source callback's error through readStream unwrapped.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// readStream reads s, from its first message, through a consumer of
// filter (reader) up to stream sequence number last (stored when the read
// began), calling fn for each message.
func readStream(ctx context.Context, s jetstream.Stream, filter string, last uint64,
	fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	r, err := openReader(ctx, s, jetstream.ConsumerConfig{FilterSubject: filter, DeliverPolicy: jetstream.DeliverAllPolicy}, apiWait)
	if err != nil {
		return err
	}
	defer r.close()
	for {
		n, done, err := r.fetch(ctx, func(m jetstream.Msg, md *jetstream.MsgMetadata) (bool, error) {
			if md.Sequence.Stream > last {
				return true, nil
			}
			if err := fn(m, md); err != nil {
				return true, fnError{err}
			}
			return md.Sequence.Stream == last, nil
		})
		if err != nil || done {
			return err
		}
		if n == 0 {
			// Nothing was delivered yet for a consumer that has just been
			// created: wait briefly rather than spin.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
			if end, err := r.ended(ctx); err != nil || end {
				return err
			}
		}
	}
}

// reader reads a stream through one ephemeral pull consumer without
// acknowledgements, in memory, on one server: cheap to create, and every
// fetch goes on where the last one stopped (an ordered consumer would be
// created again at each fetch).
type reader struct {
	s   jetstream.Stream
	c   jetstream.Consumer
	cfg jetstream.ConsumerConfig
	// wait bounds each JetStream API request (apiWait for an audit).
	wait time.Duration
	// cseq is the consumer sequence number of the last message passed,
	// sseq its stream sequence number: a message delivered to a fetch
	// that gave up waiting is never delivered again, and the gap in
	// consumer sequence numbers that follows makes the reader start a
	// consumer again after sseq.
	cseq, sseq uint64
}

// readerIdle is how long an abandoned reader's consumer outlives its last
// fetch on the server.
const readerIdle = time.Minute

// apiWait bounds one JetStream API request of a reader: a request lost
// with a connection that died fails after it rather than after the
// caller's whole deadline.
const apiWait = 10 * time.Second

// openReader creates the reader's consumer; wait bounds each of its
// JetStream API requests.
func openReader(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig, wait time.Duration) (*reader, error) {
	cfg.AckPolicy, cfg.InactiveThreshold, cfg.MemoryStorage, cfg.Replicas = jetstream.AckNonePolicy, readerIdle, true, 1
	r := &reader{s: s, cfg: cfg, wait: wait}
	c, err := r.create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.c = c
	return r, nil
}

// placeTries bounds how often a reader creates its consumer again when
// the server placed it on a replica behind the stream's leader.
const placeTries = 5

// create creates a consumer of cfg on a server whose copy of the stream
// is current. A consumer of one replica reads the copy of the server it
// is placed on, which the server picks among the stream's replicas, and a
// replica behind the leader (restarted, or partitioned while it led the
// stream, its catch-up waiting for the leader's next snapshot) delivers
// only what it holds: a read through it ends early, as if complete. So a
// consumer placed on a replica the stream's leader reports not current is
// deleted and created again, up to placeTries times.
func (r *reader) create(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, r.wait)
		c, err := r.s.CreateConsumer(cctx, cfg)
		cancel()
		if err != nil {
			return nil, err
		}
		var host string
		if ci := c.CachedInfo(); ci != nil && ci.Cluster != nil {
			host = ci.Cluster.Leader
		}
		if host == "" {
			return c, nil
		}
		ictx, cancel := context.WithTimeout(ctx, r.wait)
		si, err := r.s.Info(ictx)
		cancel()
		if err == nil && currentOn(si, host) {
			return c, nil
		}
		r.deleteConsumer(c)
		if err != nil {
			return nil, err
		}
		if try == placeTries {
			return nil, fmt.Errorf("consumer placed %d times on a replica behind the stream's leader (last on %s)", try, host)
		}
	}
}

// currentOn reports whether server host holds a current copy of the
// stream, as its info (from the stream's leader) says: host leads it, or
// is a replica the leader reports current and online; a stream without
// cluster information has one copy.
func currentOn(si *jetstream.StreamInfo, host string) bool {
	c := si.Cluster
	if c == nil || c.Leader == host {
		return true
	}
	for _, p := range c.Replicas {
		if p != nil && p.Name == host {
			return p.Current && !p.Offline
		}
	}
	return false
}

// restart replaces the reader's consumer by one that starts after the last
// message passed.
func (r *reader) restart(ctx context.Context) error {
	r.close()
	cfg := r.cfg
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartSequencePolicy, r.sseq+1, nil
	c, err := r.create(ctx, cfg)
	if err != nil {
		return err
	}
	r.c, r.cseq = c, 0
	return nil
}

// noResponderTries bounds the fetches a reader tries again when nobody
// answers yet: a consumer just created on a cluster may not be known on
// the reader's server yet.
const noResponderTries = 40

// fetch passes the messages available now, up to 512, to fn until fn says
// stop, and returns how many it passed, whether fn stopped it or the last
// one passed had none pending after it, and an error.
func (r *reader) fetch(ctx context.Context, fn func(jetstream.Msg, *jetstream.MsgMetadata) (stop bool, err error)) (n int, done bool, err error) {
	var batch jetstream.MessageBatch
	for try := 1; ; try++ {
		batch, err = r.c.FetchNoWait(512)
		if err == nil || !errors.Is(err, nats.ErrNoResponders) || try == noResponderTries {
			break
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err != nil {
		return 0, false, err
	}
	gap := false
	for m := range batch.Messages() {
		if done || gap {
			continue // drain the batch
		}
		md, err := m.Metadata()
		if err != nil {
			return n, false, err
		}
		if md.Sequence.Consumer != r.cseq+1 {
			gap = true
			continue
		}
		r.cseq, r.sseq = md.Sequence.Consumer, md.Sequence.Stream
		n++
		stop, err := fn(m, md)
		if err != nil {
			return n, true, err
		}
		done = stop || md.NumPending == 0
	}
	if gap {
		return n, false, r.restart(ctx)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrNoResponders) {
		return n, done, err
	}
	return n, done, nil
}

// ended reports whether the reader passed every message of its consumer:
// none pending, and none delivered that it did not pass (to a fetch that
// gave up waiting: the reader then starts a consumer again after the last
// message passed).
func (r *reader) ended(ctx context.Context) (bool, error) {
	ictx, cancel := context.WithTimeout(ctx, r.wait)
	ci, err := r.c.Info(ictx)
	cancel()
	if err != nil {
		return false, err
	}
	if ci.Delivered.Consumer > r.cseq {
		return false, r.restart(ctx)
	}
	return ci.NumPending == 0 && ci.NumAckPending == 0, nil
}

// close deletes the reader's consumer (best effort: the server removes an
// idle one after readerIdle anyway), so that repeated reads do not pile
// consumers up to the account's limit.
func (r *reader) close() { r.deleteConsumer(r.c) }

// deleteConsumer deletes c (best effort).
func (r *reader) deleteConsumer(c jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), min(r.wait, 2*time.Second))
	defer cancel()
	_ = r.s.DeleteConsumer(ctx, c.CachedInfo().Name)
}

// DeviceFilter is the one subject filter that selects a device's recorded
// subjects (Subjects) in a recording stream: the stream binds only
// rgc.DEVICE.KIND, rgcrec.DEVICE.session and rgcrec.DEVICE.fill subjects, so "*.DEVICE.*"
// matches exactly the device's.
func DeviceFilter(device string) string { return "*." + device + ".*" }
