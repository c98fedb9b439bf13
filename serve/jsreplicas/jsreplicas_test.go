package jsreplicas

import (
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCreate: the replicas step down from Max while the server cannot
// place them, and stop at the first success or another error.
func TestCreate(t *testing.T) {
	placeable := func(code jetstream.ErrorCode) error { return &jetstream.APIError{Code: 500, ErrorCode: code} }
	other := errors.New("no responders")
	for _, c := range []struct {
		name    string
		answers map[int]error // by replicas; absent: success
		want    int
		tries   []int
		wantErr error
	}{
		{"a cluster of three", nil, 3, []int{3}, nil},
		{"a cluster of two", map[int]error{3: placeable(errNoPeers)}, 2, []int{3, 2}, nil},
		{"a single server", map[int]error{3: placeable(errNotClusteredMode), 2: placeable(errNotClusteredMode)}, 1, []int{3, 2, 1}, nil},
		{"insufficient resources", map[int]error{3: placeable(errInsufficient)}, 2, []int{3, 2}, nil},
		{"another error stops", map[int]error{3: other}, 3, []int{3}, other},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tries []int
			n, err := Create(func(r int) error { tries = append(tries, r); return c.answers[r] })
			if n != c.want || !errors.Is(err, c.wantErr) || !slices.Equal(tries, c.tries) {
				t.Fatalf("Create: %d, %v after %v; want %d, %v after %v", n, err, tries, c.want, c.wantErr, c.tries)
			}
		})
	}
	one := placeable(errNotClusteredMode)
	if n, err := Create(func(int) error { return one }); n != 0 || !errors.Is(err, one) {
		t.Fatalf("nothing placeable: %d, %v", n, err)
	}
}
