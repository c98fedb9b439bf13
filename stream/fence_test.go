package stream

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestFence feeds a fence the messages a device receives from a standby
// group and checks which it passes, and its counters.
func TestFence(t *testing.T) {
	type msg struct {
		pos  string // "" no PosHeader
		rev  string // "" no LeaseHeader
		at   time.Duration
		pass bool
	}
	const hold = 100 * time.Millisecond
	cases := []struct {
		name  string
		msgs  []msg
		stats FenceStats
	}{
		{"no position: all pass", []msg{{"", "", 0, true}, {"", "", 0, true}}, FenceStats{}},
		{"malformed position passes", []msg{{"1.5.0", "3", 0, true}, {"x", "3", 0, true}}, FenceStats{}},
		{"one holder in order", []msg{{"1.5.0", "3", 0, true}, {"1.5.1", "4", 0, true}, {"1.6.0", "4", 0, true}, {"2.-9223372036854775808.0", "4", 0, true}}, FenceStats{}},
		{"repeated position dropped", []msg{{"1.5.0", "3", 0, true}, {"1.5.0", "3", 0, false}, {"1.4.0", "3", 0, false}, {"1.6.0", "3", 0, true}},
			FenceStats{Repeated: 2}},
		{"takeover: the new holder's copies dropped, the old holder's late ones fenced", []msg{
			{"1.5.0", "3", 0, true}, {"1.6.0", "3", 0, true},
			{"1.6.0", "9", 0, false}, // the new holder re-sends 6
			{"1.7.0", "9", 0, true},
			{"1.8.0", "3", 0, false}, // the old holder's message, released late
			{"1.8.0", "9", 0, true},
		}, FenceStats{Repeated: 1, Fenced: 1}},
		{"forged far ahead: resynced after the hold", []msg{
			{"1.5.0", "3", 0, true},
			{"4294967295.9223372036854775807.2147483647", "3", 1 * time.Millisecond, true},
			{"1.6.0", "3", 2 * time.Millisecond, false},
			{"1.7.0", "3", hold, false},
			{"1.8.0", "3", hold + 3*time.Millisecond, true},
			{"1.9.0", "3", hold + 4*time.Millisecond, true},
		}, FenceStats{Repeated: 2, Resynced: 1}},
		{"forged revision: resynced after the hold", []msg{
			{"1.5.0", "3", 0, true},
			{"1.6.0", "18446744073709551615", 1 * time.Millisecond, true},
			{"1.7.0", "3", 2 * time.Millisecond, false},
			{"1.7.1", "3", hold / 2, false},
			{"1.8.0", "3", hold + 3*time.Millisecond, true},
		}, FenceStats{Fenced: 2, Resynced: 1}},
		{"takeover after a long silence: the new holder's copies still dropped", []msg{
			{"1.5.0", "3", 0, true},
			{"1.5.0", "9", 10 * hold, false},
			{"1.6.0", "9", 10*hold + time.Millisecond, true},
		}, FenceStats{Repeated: 1}},
		{"positions restarted (group restarted): resynced after the hold", []msg{
			{"5.100.0", "3", 0, true},
			{"1.5.0", "1", hold, false},
			{"1.5.1", "1", 3 * hold / 2, false},
			{"1.6.0", "1", 2*hold + time.Millisecond, true},
			{"1.7.0", "1", 2*hold + 2*time.Millisecond, true},
		}, FenceStats{Fenced: 2, Resynced: 1}},
		{"copies after a silence: still dropped, the hold counts from the last silence", []msg{
			{"1.5.0", "3", 0, true}, {"1.6.0", "3", time.Millisecond, true}, {"1.7.0", "3", 2 * time.Millisecond, true},
			{"1.6.0", "3", 10 * time.Millisecond, false},        // a copy
			{"1.7.0", "9", 10*time.Millisecond + 5*hold, false}, // the holder's republish after an outage
			{"1.7.0", "9", 10*time.Millisecond + 9*hold, false},
			{"1.8.0", "9", 10*time.Millisecond + 9*hold + time.Millisecond, true},
		}, FenceStats{Repeated: 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &Fence{Hold: hold}
			t0 := time.Now()
			for i, m := range c.msgs {
				h := nats.Header{}
				if m.pos != "" {
					h.Set(PosHeader, m.pos)
				}
				if m.rev != "" {
					h.Set(LeaseHeader, m.rev)
				}
				if got := f.Admit(h, t0.Add(m.at)); got != m.pass {
					t.Errorf("message %d (%s rev %s at %v): passed %v, want %v", i, m.pos, m.rev, m.at, got, m.pass)
				}
			}
			if st := f.Stats(); st != c.stats {
				t.Errorf("stats %+v, want %+v", st, c.stats)
			}
		})
	}
}

// TestFenceAllocs: admitting a group's message allocates nothing.
func TestFenceAllocs(t *testing.T) {
	var f Fence
	h := nats.Header{PosHeader: {"1.5.0"}, LeaseHeader: {"3"}}
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { f.Admit(h, now) }); n != 0 {
		t.Fatalf("%v allocations per message, want 0", n)
	}
}

// TestFenceShards: two shards of a device, each a standby group, publish
// at the same positions; the fence keeps a mark per group, so every
// shard's messages pass once and repeats are still dropped per shard.
func TestFenceShards(t *testing.T) {
	f := &Fence{}
	now := time.Now()
	msgs := []struct {
		group, pos string
		pass       bool
	}{
		{"g0.0.2", "1.5.0", true},
		{"g1.1.2", "1.5.0", true},
		{"g0.0.2", "1.6.0", true},
		{"g1.1.2", "1.6.0", true},
		{"g1.1.2", "1.6.0", false},
		{"g0.0.2", "1.5.0", false},
	}
	for i, m := range msgs {
		h := nats.Header{PosHeader: {m.pos}, GroupHeader: {m.group}, LeaseHeader: {"3"}}
		if got := f.Admit(h, now); got != m.pass {
			t.Errorf("message %d (%s at %s): passed %v, want %v", i, m.group, m.pos, got, m.pass)
		}
	}
	if st := f.Stats(); st != (FenceStats{Repeated: 2}) {
		t.Errorf("stats %+v, want 2 repeated", st)
	}
	for i := range MaxFenceGroups + 3 {
		f.Admit(nats.Header{PosHeader: {"1.5.0"}, GroupHeader: {"x" + string(rune('A'+i%26)) + string(rune('A'+i/26))}}, now)
	}
	if st := f.Stats(); st.Unfenced != 5 {
		t.Errorf("%d messages unfenced past %d groups, want 5", st.Unfenced, MaxFenceGroups)
	}
}
