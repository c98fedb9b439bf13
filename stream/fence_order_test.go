package stream

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDecisionsCellOrder drives a decision subscription's fence and hold
// (resendHold.receive) with the messages a device received around a full
// outage (nemesis seed 35): a window's decision missed in the outage
// reaches the device after later windows of its cell, as a copy in the
// open resend window or as a trailing new holder's message. Each cell's
// windows are handed on in order or not at all (FenceStats.Late); a
// decision of the same late message for a cell with no later window is
// still taken; a group whose positions restarted is taken again.
func TestDecisionsCellOrder(t *testing.T) {
	const group = "nemesis.0.1"
	type step struct {
		at    time.Duration // after t0
		epoch uint32
		bin   int64
		rev   uint64
		copy  bool
		cells []int32 // windows ending at bin
		want  []int32 // cells handed on
	}
	lose := step{bin: -1} // the connection is lost; the group answers nothing within the hold
	cases := []struct {
		name  string
		steps []step
		late  uint64
	}{
		{"copy after later windows (seed 35)", []step{
			{0, 1, 738800, 5, false, []int32{21, 35, 40}, []int32{21, 35, 40}},
			lose,
			{1500 * time.Millisecond, 1, 747858, 9, false, []int32{35}, []int32{35}},
			{1500 * time.Millisecond, 1, 747884, 9, false, []int32{21}, []int32{21}},
			{1600 * time.Millisecond, 1, 739138, 5, true, []int32{21, 35, 40}, []int32{40}},
			{1700 * time.Millisecond, 1, 747900, 9, false, []int32{21, 40}, []int32{21, 40}},
		}, 2},
		{"trailing new holder's message after later windows", []step{
			{0, 1, 738800, 5, false, []int32{21}, []int32{21}},
			lose,
			{1500 * time.Millisecond, 1, 747884, 5, false, []int32{21}, []int32{21}},
			{1600 * time.Millisecond, 1, 739138, 9, false, []int32{21}, nil},
			{1600 * time.Millisecond, 1, 747884, 9, false, []int32{21}, nil}, // the same window again: the fence's
		}, 1},
		{"a later epoch goes on, an older one is late", []step{
			{0, 1, 738800, 5, false, []int32{21}, []int32{21}},
			lose,
			{1500 * time.Millisecond, 2, 10, 5, false, []int32{21}, []int32{21}},
			{1600 * time.Millisecond, 1, 738900, 5, true, []int32{21}, nil},
		}, 1},
		{"positions restarted: resynced, the cells' windows taken again", []step{
			{0, 5, 900, 3, false, []int32{21}, []int32{21}},
			{time.Millisecond, 1, 100, 1, false, []int32{21}, nil},
			{200 * time.Millisecond, 1, 140, 1, false, []int32{21}, nil},
			{400 * time.Millisecond, 1, 180, 1, false, []int32{21}, []int32{21}},
			{401 * time.Millisecond, 1, 260, 1, false, []int32{21}, []int32{21}},
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []int32
			f := &Fence{}
			h := &resendHold{fence: f, deliver: func(d *Decisions) {
				for _, x := range d.Decisions {
					got = append(got, x.Cell)
				}
			}}
			t0 := time.Unix(1000, 0)
			gen := uint64(0)
			for i, s := range c.steps {
				h.mu.Lock()
				if s.bin == -1 {
					gen++
					h.begin(f.lost(gen, t0))
					h.mu.Unlock()
					h.answered(group, Pos{}, false) // the hold ran out: no holder answered
					continue
				}
				hdr := nats.Header{PosHeader: {Pos{Epoch: s.epoch, Bin: s.bin}.String()}, GroupHeader: {group},
					LeaseHeader: {strconv.FormatUint(s.rev, 10)}}
				if s.copy {
					hdr.Set(CopyHeader, "1")
				}
				d := &Decisions{}
				for _, cell := range s.cells {
					d.Decisions = append(d.Decisions, Decision{Cell: cell, Epoch: uint16(s.epoch), End: s.bin, Kind: KindSilence, Bin: s.bin + 80})
				}
				got = got[:0]
				h.receive(hdr, d, t0.Add(s.at))
				h.mu.Unlock()
				if !slices.Equal(got, s.want) {
					t.Errorf("step %d (%d.%d, copy %v): handed on cells %v, want %v", i, s.epoch, s.bin, s.copy, got, s.want)
				}
			}
			if l := f.Stats().Late; l != c.late {
				t.Errorf("late %d, want %d (stats %+v)", l, c.late, f.Stats())
			}
		})
	}
}

// TestResendHoldTimer: the hold's timer releases only the hold it
// started, not a later hold of the same group. The test fires the timers
// itself, in the order a clock would.
func TestResendHoldTimer(t *testing.T) {
	var n int
	var timers []func()
	h := &resendHold{deliver: func(*Decisions) { n++ }, afterFunc: func(d time.Duration, f func()) {
		if d != ResendHold {
			t.Errorf("a hold's timer of %v, want ResendHold %v", d, ResendHold)
		}
		timers = append(timers, f)
	}}
	h.mu.Lock()
	h.begin([]string{"g.0.1"})
	h.mu.Unlock()
	h.answered("g.0.1", Pos{}, false) // released early (no copies)
	h.mu.Lock()
	h.begin([]string{"g.0.1"}) // the next reconnect holds again
	h.take("g.0.1", Pos{Epoch: 1, Bin: 5}, &Decisions{Decisions: []Decision{{End: 5}}}, false)
	h.mu.Unlock()
	if len(timers) != 2 {
		t.Fatalf("%d timers started by two holds, want 2", len(timers))
	}
	timers[0]() // the first hold's time is up
	h.mu.Lock()
	held, delivered := h.groups["g.0.1"] != nil, n
	h.mu.Unlock()
	if !held || delivered != 0 {
		t.Fatalf("held %v, delivered %d: the first hold's timer released the second", held, delivered)
	}
	timers[1]()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.groups["g.0.1"] != nil || n != 1 {
		t.Fatalf("held %v, delivered %d after the second hold's time", h.groups["g.0.1"] != nil, n)
	}
}
