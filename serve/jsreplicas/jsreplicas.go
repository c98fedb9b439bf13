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
	errNoPeers          jetstream.ErrorCode = 10005 // a cluster with fewer nodes than replicas
	errInsufficient     jetstream.ErrorCode = 10023
	errNotClusteredMode jetstream.ErrorCode = 10074 // a single server
)

// Create calls create with Max replicas, then with fewer while the server
// answers that it cannot place them, and returns the count that worked.
// Any other error is returned as is.
func Create(create func(replicas int) error) (int, error) {
	var err error
	for n := Max; n >= 1; n-- {
		if err = create(n); err == nil || !tooMany(err) {
			return n, err
		}
	}
	return 0, err
}

// tooMany reports whether err says the server cannot place the replicas.
func tooMany(err error) bool {
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
