package service

import (
	"testing"
	"time"
)

// TestProgressStalled: a processor counts as stalled once it has been
// inside a message for longer than the TTL since it began it or last
// finished a model call; idle, or finishing calls more often than the
// TTL however long the message, it does not.
func TestProgressStalled(t *testing.T) {
	const ttl = 60 * time.Millisecond
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type op struct {
		step bool // else begin
		at   time.Duration
	}
	for _, c := range []struct {
		name string
		ops  []op
		end  bool // the message ended after ops
		now  time.Duration
		want bool
	}{
		{name: "idle", now: time.Hour},
		{name: "begun within the TTL", ops: []op{{at: 0}}, now: ttl, want: false},
		{name: "begun a TTL ago, no call finished", ops: []op{{at: 0}}, now: ttl + time.Millisecond, want: true},
		{name: "a long catch-up, a call every 10 ms", ops: func() []op {
			ops := []op{{at: 0}}
			for i := 1; i <= 200; i++ {
				ops = append(ops, op{step: true, at: time.Duration(i) * 10 * time.Millisecond})
			}
			return ops
		}(), now: 2*time.Second + 50*time.Millisecond, want: false},
		{name: "calls, then one stuck past the TTL", ops: []op{{at: 0}, {step: true, at: 10 * time.Millisecond},
			{step: true, at: 20 * time.Millisecond}}, now: 20*time.Millisecond + ttl + time.Millisecond, want: true},
		{name: "ended after a long message", ops: []op{{at: 0}}, end: true, now: time.Hour},
		{name: "a call outside a message stays idle", ops: []op{{step: true, at: 0}}, now: time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p progress
			for _, o := range c.ops {
				if o.step {
					p.step(at(o.at))
				} else {
					p.begin(at(o.at))
				}
			}
			if c.end {
				p.end()
			}
			if got := p.stalled(at(c.now), ttl); got != c.want {
				t.Fatalf("stalled at +%v = %v, want %v", c.now, got, c.want)
			}
		})
	}
}
