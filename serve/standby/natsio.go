package standby

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// NATSPublisher returns a Publisher that publishes on nc with the position
// in PosHeader. It is for one goroutine at a time (the gate serialises it)
// and reuses its message and header buffers.
func NATSPublisher(nc *nats.Conn) Publisher {
	m := &nats.Msg{Header: nats.Header{}}
	var buf []byte
	return func(subject string, pos Pos, data []byte) error {
		buf = pos.AppendText(buf[:0])
		m.Subject, m.Data = subject, data
		m.Header.Set(PosHeader, string(buf))
		if err := nc.PublishMsg(m); err != nil {
			return fmt.Errorf("standby: publish %s at %s: %w", subject, buf, err)
		}
		return nil
	}
}

// ObserveNATS subscribes to subjects on nc and tells g the position of every
// message carrying PosHeader (messages without one are ignored; malformed
// ones go to onErr, which may be nil). Unsubscribe the returned
// subscriptions to stop.
func ObserveNATS(nc *nats.Conn, g *Gate, onErr func(error), subjects ...string) ([]*nats.Subscription, error) {
	subs := make([]*nats.Subscription, 0, len(subjects))
	cb := func(m *nats.Msg) {
		v := m.Header.Get(PosHeader)
		if v == "" {
			return
		}
		p, err := ParsePos(v)
		if err != nil {
			if onErr != nil {
				onErr(fmt.Errorf("standby: message on %s: %w", m.Subject, err))
			}
			return
		}
		g.Observe(p)
	}
	for _, s := range subjects {
		sub, err := nc.Subscribe(s, cb)
		if err != nil {
			for _, o := range subs {
				_ = o.Unsubscribe()
			}
			return nil, fmt.Errorf("standby: observe %s: %w", s, err)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}
