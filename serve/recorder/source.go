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
}

// Source yields one device's recorded messages in recording order, calling
// fn for each until fn returns an error (which Source returns) or the
// messages end. Every call starts again at the first message.
type Source func(ctx context.Context, fn func(Msg) error) error

// StreamSource returns the Source of device's messages in the recording
// stream name: an ordered consumer over the device's subjects reading the
// messages stored when the call began, with the messages a Filler stored
// again put back in their place (Merge; a first consumer reads those on
// FillSubject). Each consumer has one filter subject, so it works on
// every JetStream server (nats-server 2.9 takes no more than one).
func StreamSource(js jetstream.JetStream, name, device string) Source {
	kinds := kindsOf(device)
	fillSubj := FillSubject(device)
	return func(ctx context.Context, fn func(Msg) error) error {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("recorder: stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("recorder: stream %s: %w", name, err)
		}
		last := info.State.LastSeq
		if info.State.Msgs == 0 {
			return nil
		}
		mg := newMerger(device)
		err = readStream(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{fillSubj}}, last,
			func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
				mg.add(Msg{Seq: md.Sequence.Stream, Time: md.Timestamp, Data: m.Data(), Subject: m.Subject(), Header: m.Headers()})
				return nil
			})
		if err != nil {
			return fmt.Errorf("recorder: read %s: %w", name, err)
		}
		mg.sort()
		err = readStream(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{DeviceFilter(device)}}, last,
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

// readStream reads s through an ordered consumer of cc up to stream
// sequence number last (stored when the read began), calling fn for each
// message.
func readStream(ctx context.Context, s jetstream.Stream, cc jetstream.OrderedConsumerConfig, last uint64,
	fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	c, err := s.OrderedConsumer(ctx, cc)
	if err != nil {
		return err
	}
	defer deleteConsumer(s, c)
	for {
		batch, err := c.FetchNoWait(512)
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if md.Sequence.Stream > last {
				return nil
			}
			if err := fn(m, md); err != nil {
				return fnError{err}
			}
			if md.Sequence.Stream == last || md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
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
			if ci, err := c.Info(ctx); err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 {
				return nil
			}
		}
	}
}

// deleteConsumer deletes an ordered consumer once read (best effort: the
// server removes an idle one after its inactivity threshold anyway), so
// that repeated reads do not pile consumers up to the account's limit.
func deleteConsumer(s jetstream.Stream, c jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if name := c.CachedInfo().Name; name != "" {
		_ = s.DeleteConsumer(ctx, name)
	}
}

// DeviceFilter is the one subject filter that selects a device's recorded
// subjects (Subjects) in a recording stream: the stream binds only
// rgc.DEVICE.KIND, rgcrec.DEVICE.session and rgcrec.DEVICE.fill subjects, so "*.DEVICE.*"
// matches exactly the device's.
func DeviceFilter(device string) string { return "*." + device + ".*" }
