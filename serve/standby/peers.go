package standby

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultPeerWait is GroupConfig.PeerWait's default: longer than a pause
// or cut of a live instance that the lease entry's own expiry (at least
// LeaseBucketMinTTL) does not already cover.
const DefaultPeerWait = time.Second

// PeersSubject is the subject on which an instance without the group's
// state asks whether an instance with it is alive. Every instance whose
// state is the group's on at least one device, and whose processors make
// progress (GroupConfig.Healthy), answers with a peerAnswer; one catching
// up does not.
func PeersSubject(group string) string { return "rgcpred.standby." + group + ".peers" }

// peerAnswer is an instance's answer on PeersSubject.
type peerAnswer struct {
	ID          string `json:"id"`
	Incarnation string `json:"incarnation"`
	// Synced counts the devices whose state is the group's.
	Synced int `json:"synced"`
	// Sig is the signature over the request's inbox and the answer
	// without it (GroupConfig.Auth).
	Sig []byte `json:"sig,omitempty"`
}

// peerSigned returns what a peers answer's signature covers: the
// request's inbox too, so that an answer recorded from an earlier request
// is refused when replayed to a later one.
func peerSigned(a peerAnswer, inbox string) ([]byte, error) {
	a.Sig = nil
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return append([]byte("peers\n"+inbox+"\n"), b...), nil
}

// encodePeerAnswer encodes a, signed with auth (nil: unsigned) for the
// request whose reply subject is inbox.
func encodePeerAnswer(a peerAnswer, inbox string, auth Authenticator) ([]byte, error) {
	if auth != nil {
		b, err := peerSigned(a, inbox)
		if err == nil {
			a.Sig, err = auth.Sign(b)
		}
		if err != nil {
			return nil, fmt.Errorf("standby: sign a peers answer: %w", err)
		}
	}
	return json.Marshal(a)
}

// readPeerAnswer decodes a peers answer received on the requester's inbox
// and checks it: an instance and at least one synced device, and with
// auth its signature for this request.
func readPeerAnswer(m *nats.Msg, auth Authenticator) (peerAnswer, error) {
	var a peerAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return a, fmt.Errorf("peers answer: %w", err)
	}
	if a.ID == "" || a.Incarnation == "" || a.Synced <= 0 {
		return a, errors.New("peers answer without an instance or a synced device")
	}
	if auth != nil {
		b, err := peerSigned(a, m.Subject)
		if err == nil {
			err = auth.Verify(b, a.Sig)
		}
		if err != nil {
			return a, fmt.Errorf("peers answer of %s: signature: %w", a.ID, err)
		}
	}
	return a, nil
}

// answerPeers answers a peers request (NATS goroutine) while this
// instance has the group's state on a device and makes progress.
func (g *Group) answerPeers(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	n := 0
	for _, r := range g.replicas {
		if r.synced.Load() {
			n++
		}
	}
	if n == 0 || (g.cfg.Healthy != nil && !g.cfg.Healthy()) {
		return
	}
	b, err := encodePeerAnswer(peerAnswer{ID: g.cfg.ID, Incarnation: g.lease.Incarnation(), Synced: n}, m.Reply, g.cfg.Auth)
	if err == nil {
		err = g.nc.Publish(m.Reply, b)
	}
	if err != nil {
		g.cfg.Warn("standby/peers", fmt.Errorf("standby: answer a peers request: %w", err))
	}
}

// peerSynced asks the group, every SyncEvery for up to wait, whether an
// instance with the group's state is alive, and reports whether one
// (other than this one) answered; with an authenticator, only a signed
// answer counts (a refused one raises AlarmState). It returns at the
// first answer; an error means the requests could not be sent.
func (g *Group) peerSynced(ctx context.Context, wait time.Duration) (bool, error) {
	inbox := g.nc.NewRespInbox()
	sub, err := g.nc.SubscribeSync(inbox)
	if err != nil {
		return false, fmt.Errorf("standby: ask for peers: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	deadline := time.Now().Add(wait)
	subject := PeersSubject(g.cfg.Group)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		if err := g.nc.PublishRequest(subject, inbox, nil); err != nil {
			return false, fmt.Errorf("standby: ask for peers: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, min(g.cfg.SyncEvery, left))
		found, err := g.peerAnswered(rctx, sub)
		cancel()
		switch {
		case found:
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrNoResponders):
			return false, fmt.Errorf("standby: ask for peers: %w", err)
		}
	}
}

// peerAnswered reads sub's answers until one from another instance passes
// the checks (true) or ctx ends.
func (g *Group) peerAnswered(ctx context.Context, sub *nats.Subscription) (bool, error) {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if errors.Is(err, nats.ErrNoResponders) {
			continue // nobody listens now: asked again after SyncEvery
		}
		if err != nil {
			return false, err
		}
		a, err := readPeerAnswer(m, g.cfg.Auth)
		if err != nil {
			g.alarm(AlarmState, "", fmt.Errorf("standby: a peers answer refused: %w", err))
			continue
		}
		if a.Incarnation != g.lease.Incarnation() {
			return true, nil
		}
	}
}
