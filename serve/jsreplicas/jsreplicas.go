// Package jsreplicas gives a JetStream stream or bucket as many replicas
// as the cluster allows, up to Max: a single server takes one, a cluster
// of two nodes two, a larger one Max. The state in it then survives the
// loss of any node but the last of its replicas.
package jsreplicas

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Max is the most replicas asked for: a majority survives one node lost.
const Max = 3

// The server's answers to more replicas than it can place.
const (
	errNoPeers          jetstream.ErrorCode = 10005 // fewer current peers than replicas
	errInsufficient     jetstream.ErrorCode = 10023
	errNotClusteredMode jetstream.ErrorCode = 10074 // a single server
)

// The reasons Reason names.
const (
	ReasonNone         = "none"
	ReasonNoPeers      = "no_peers"
	ReasonInsufficient = "insufficient_resources"
	ReasonNotClustered = "not_clustered"
	ReasonOther        = "other"
)

// Reasons lists every value of Reason, for metrics initialised at start.
var Reasons = []string{ReasonNone, ReasonNoPeers, ReasonInsufficient, ReasonNotClustered, ReasonOther}

// Placement is the replicas a stream or bucket has against those wanted.
type Placement struct {
	// Want is the count asked for; Have the count it has.
	Want, Have int
	// Short, when Have < Want, is the server's answer to Want.
	Short error
}

// Reason names why Have is below Want: ReasonNone when it is not, else
// the server's answer (Reasons).
func (p Placement) Reason() string {
	if p.Have >= p.Want {
		return ReasonNone
	}
	var api *jetstream.APIError
	if !errors.As(p.Short, &api) {
		return ReasonOther
	}
	switch api.ErrorCode {
	case errNoPeers:
		return ReasonNoPeers
	case errInsufficient:
		return ReasonInsufficient
	case errNotClusteredMode:
		return ReasonNotClustered
	}
	return ReasonOther
}

// Raise gives a stream or bucket that has have replicas (0: none yet)
// want: it calls apply with max(want, have), so a count is raised and
// never lowered, then with one fewer while the server answers that it
// cannot place them, down to max(lowest, have, 1). It returns the count
// that worked, and the server's answer to the first count in Short when
// that is below want. Another error is returned as is, with Have the
// count tried.
func Raise(have, want, lowest int, apply func(replicas int) error) (Placement, error) {
	p := Placement{Want: want, Have: have}
	var err error
	for n := max(want, have); n >= max(lowest, have, 1); n-- {
		if err = apply(n); err == nil || !Unplaceable(err) {
			p.Have = n
			return p, err
		}
		if p.Short == nil {
			p.Short = err
		}
	}
	return p, err
}

// Unplaceable reports whether err says the server cannot place the
// replicas.
func Unplaceable(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case errNoPeers, errInsufficient, errNotClusteredMode:
		return true
	}
	return false
}

// Forming reports whether err says the cluster cannot place the replicas
// yet: its meta group knows too few peers, as while it forms (a node
// joining). A single server never places more than one.
func Forming(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == errNoPeers || api.ErrorCode == errInsufficient)
}
