package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"rgcpred/serve/service"
)

// waitReached waits until every one of n instances answers a micro PING
// sent through the device's connection nc, at most timeout: their
// subscriptions, made at start with those on the device's subjects, have
// then reached the device's node over the cluster's routes. A replay
// started before that loses its first messages at an instance that
// joined last (its reset, or its first frames), which then starts
// another stream than the device's.
func waitReached(ctx context.Context, nc *nats.Conn, n int, timeout time.Duration) error {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return fmt.Errorf("nemesis: ping the instances: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	subject := "$SRV.PING." + service.MicroName
	seen := map[string]bool{}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return fmt.Errorf("nemesis: ping the instances: %w", err)
	}
	for len(seen) < n {
		select {
		case m := <-ch:
			var p micro.Ping
			if json.Unmarshal(m.Data, &p) == nil && p.ID != "" {
				seen[p.ID] = true
			}
		case <-tick.C:
			if err := nc.PublishRequest(subject, inbox, nil); err != nil {
				return fmt.Errorf("nemesis: ping the instances: %w", err)
			}
		case <-deadline.C:
			return fmt.Errorf("nemesis: %d of %d instances answered a ping through the device's node in %v", len(seen), n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
