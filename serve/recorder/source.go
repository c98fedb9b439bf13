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
	Seq  uint64
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
// messages stored when the call began. The consumer has one filter subject,
// DeviceFilter, so it works on every JetStream server (nats-server 2.9
// takes no more than one).
func StreamSource(js jetstream.JetStream, name, device string) Source {
	kinds := map[string]Kind{
		stream.StimSubject(device):    KindFrames,
		stream.ControlSubject(device): KindControl,
		stream.SpikesSubject(device):  KindDecisions,
		stream.EventsSubject(device):  KindEvent,
		SessionSubject(device):        KindSession,
	}
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
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{DeviceFilter(device)},
			DeliverPolicy:  jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return fmt.Errorf("recorder: read %s: %w", name, err)
		}
		for {
			batch, err := c.FetchNoWait(512)
			if err != nil {
				return fmt.Errorf("recorder: read %s: %w", name, err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				md, err := m.Metadata()
				if err != nil {
					return fmt.Errorf("recorder: read %s: %w", name, err)
				}
				if md.Sequence.Stream > last {
					return nil
				}
				if k, ok := kinds[m.Subject()]; ok {
					if err := fn(Msg{Kind: k, Seq: md.Sequence.Stream, Time: md.Timestamp, Data: m.Data(), Subject: m.Subject(), Header: m.Headers()}); err != nil {
						return err
					}
				}
				if md.Sequence.Stream == last || md.NumPending == 0 {
					return nil
				}
			}
			if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
				return fmt.Errorf("recorder: read %s: %w", name, err)
			}
			if n == 0 {
				// Nothing was delivered yet for a consumer that has just been
				// created: wait briefly rather than spin.
				select {
				case <-ctx.Done():
					return fmt.Errorf("recorder: read %s: %w", name, ctx.Err())
				case <-time.After(10 * time.Millisecond):
				}
				if ci, err := c.Info(ctx); err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 {
					return nil
				}
			}
		}
	}
}

// DeviceFilter is the one subject filter that selects a device's recorded
// subjects (Subjects) in a recording stream: the stream binds only
// rgc.DEVICE.KIND and rgcrec.DEVICE.session subjects, so "*.DEVICE.*"
// matches exactly the device's.
func DeviceFilter(device string) string { return "*." + device + ".*" }
