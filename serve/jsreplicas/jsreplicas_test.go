package jsreplicas

import (
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRaise: a count is raised to the one wanted and never lowered; the
// steps down stop at the lowest allowed, and the server's answer to the
// count wanted says why fewer were placed.
func TestRaise(t *testing.T) {
	placeable := func(code jetstream.ErrorCode) error { return &jetstream.APIError{Code: 500, ErrorCode: code} }
	noPeers, single := placeable(errNoPeers), placeable(errNotClusteredMode)
	other := errors.New("no responders")
	for _, c := range []struct {
		name                 string
		have, want, lowest   int
		answers              map[int]error // by replicas; absent: success
		tries                []int
		wantHave             int
		wantReason           string
		wantErr, wantForming error
	}{
		{"an R1 bucket raised to 3", 1, 3, 1, nil, []int{3}, 3, ReasonNone, nil, nil},
		{"an R3 bucket kept when 1 is wanted", 3, 1, 1, nil, []int{3}, 3, ReasonNone, nil, nil},
		{"a cluster forming: 3 not placed yet, the wait goes on", 1, 3, 3, map[int]error{3: noPeers}, []int{3}, 1, ReasonNoPeers, noPeers, noPeers},
		{"the wait over: 2 placed, 1 never lowered to", 1, 3, 1, map[int]error{3: noPeers}, []int{3, 2}, 2, ReasonNoPeers, nil, nil},
		{"none placed above the bucket's own", 1, 3, 1, map[int]error{3: noPeers, 2: noPeers}, []int{3, 2, 1}, 1, ReasonNoPeers, nil, nil},
		{"a single server", 0, 3, 1, map[int]error{3: single, 2: single}, []int{3, 2, 1}, 1, ReasonNotClustered, nil, nil},
		{"another error stops", 0, 3, 1, map[int]error{3: other}, []int{3}, 3, ReasonNone, other, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tries []int
			p, err := Raise(c.have, c.want, c.lowest, func(r int) error { tries = append(tries, r); return c.answers[r] })
			if p.Have != c.wantHave || p.Want != c.want || p.Reason() != c.wantReason || !errors.Is(err, c.wantErr) || !slices.Equal(tries, c.tries) {
				t.Fatalf("Raise: %+v (%s), %v after %v; want %d (%s), %v after %v", p, p.Reason(), err, tries, c.wantHave, c.wantReason, c.wantErr, c.tries)
			}
			if Forming(err) != (c.wantForming != nil) {
				t.Fatalf("Forming(%v) = %v", err, Forming(err))
			}
		})
	}
}
