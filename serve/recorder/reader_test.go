package recorder

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCurrentOn: a reader takes a consumer on the stream's leader, on a
// replica the leader reports current and online, or on a server without
// replicas; not on a replica behind, offline, or unknown to the leader.
func TestCurrentOn(t *testing.T) {
	cluster := func(replicas ...*jetstream.PeerInfo) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Cluster: &jetstream.ClusterInfo{Leader: "n0", Replicas: replicas}}
	}
	for _, tc := range []struct {
		name string
		si   *jetstream.StreamInfo
		host string
		want bool
	}{
		{"one server", &jetstream.StreamInfo{}, "n0", true},
		{"the leader", cluster(&jetstream.PeerInfo{Name: "n1"}), "n0", true},
		{"a current replica", cluster(&jetstream.PeerInfo{Name: "n1", Current: true}, &jetstream.PeerInfo{Name: "n2"}), "n1", true},
		{"a replica behind", cluster(&jetstream.PeerInfo{Name: "n1", Current: true}, &jetstream.PeerInfo{Name: "n2"}), "n2", false},
		{"a replica offline", cluster(&jetstream.PeerInfo{Name: "n2", Current: true, Offline: true}), "n2", false},
		{"no replica of the stream", cluster(&jetstream.PeerInfo{Name: "n1", Current: true}), "n3", false},
	} {
		if got := currentOn(tc.si, tc.host); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
