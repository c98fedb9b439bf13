package standby

import (
	"slices"
	"testing"

	"rgcpred/stream"
)

// TestGateForget: a standby that kept messages of a stream only it
// started (epoch 2), then restored the holder's state (epoch 1), publishes
// its epoch-1 messages at a takeover; without Forget the kept epoch-2
// messages go out first (a stream the device never had) and the epoch-1
// message kept after them is discarded as already published (lost).
func TestGateForget(t *testing.T) {
	for _, c := range []struct {
		name   string
		forget bool
		want   []stream.Pos
	}{
		{"forgotten at the restore", true, []stream.Pos{{Epoch: 1, Bin: 20}, {Epoch: 1, Bin: 21}}},
		{"kept across the restore", false, []stream.Pos{{Epoch: 2, Bin: stream.EventBin}, {Epoch: 2, Bin: 10}, {Epoch: 1, Bin: 21}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []stream.Pos
			held := false
			g, err := NewGate(func(_ string, p stream.Pos, _ []byte) error {
				got = append(got, p)
				return nil
			}, func() bool { return held }, 16)
			if err != nil {
				t.Fatal(err)
			}
			g.Observe(stream.Pos{Epoch: 1, Bin: 9}) // the holder's
			for _, p := range []stream.Pos{{Epoch: 2, Bin: stream.EventBin}, {Epoch: 2, Bin: 10}} {
				if err := g.Publish("s", p, nil); err != nil {
					t.Fatal(err)
				}
			}
			if c.forget {
				g.ResetPos()
				g.Forget()
			}
			if err := g.Publish("s", stream.Pos{Epoch: 1, Bin: 20}, nil); err != nil {
				t.Fatal(err)
			}
			held = true
			if err := g.Gain(); err != nil {
				t.Fatal(err)
			}
			if err := g.Publish("s", stream.Pos{Epoch: 1, Bin: 21}, nil); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("published %v, want %v", got, c.want)
			}
			if st := g.Stats(); c.forget && st.Replaced != 2 {
				t.Fatalf("replaced %d, want the 2 kept epoch-2 messages", st.Replaced)
			}
		})
	}
}
