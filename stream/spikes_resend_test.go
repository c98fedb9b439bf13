package stream

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// groupMsg returns the headers of group g's message at bin b (epoch 1,
// index 0) under lease revision rev.
func groupMsg(g string, b int64, rev uint64) nats.Header {
	return nats.Header{PosHeader: {Pos{Epoch: 1, Bin: b}.String()}, GroupHeader: {g}, LeaseHeader: {strconv.FormatUint(rev, 10)}}
}

// TestFenceResendWindow: a fence that lost its connection after bin 3
// takes, once each, the copies of the messages it missed (bins 4 to 6, of
// an older revision than the live ones it took meanwhile), drops the
// copies of those it had (before the loss and live after it), asks from
// bin 3, and after its window closed (answered) drops copies again; the
// next loss asks from its own mark.
func TestFenceResendWindow(t *testing.T) {
	var f Fence
	t0 := time.Unix(1000, 0)
	admit := func(b int64, rev uint64, at time.Duration) bool {
		return f.Admit(groupMsg("g.0.1", b, rev), t0.Add(at))
	}
	for b := int64(1); b <= 3; b++ {
		if !admit(b, 5, 0) {
			t.Fatalf("bin %d refused before the loss", b)
		}
	}
	f.lost(1, t0)
	f.lost(1, t0.Add(time.Millisecond)) // the same reconnect again: no new window
	for _, b := range []int64{7, 8} {
		if !admit(b, 6, time.Millisecond) {
			t.Fatalf("live bin %d refused", b)
		}
	}
	reqs := f.resendFrom(t0.Add(time.Second))
	if len(reqs) != 1 || reqs[0].group != "g.0.1" || reqs[0].after != (Pos{Epoch: 1, Bin: 3}) {
		t.Fatalf("requests %+v, want one for g.0.1 after 1.3.0", reqs)
	}
	cases := []struct {
		bin  int64
		want bool
	}{{2, false}, {3, false}, {4, true}, {5, true}, {6, true}, {7, false}, {8, false}, {4, false}}
	for _, c := range cases {
		if got := admit(c.bin, 5, 10*time.Millisecond); got != c.want {
			t.Errorf("copy of bin %d: admitted %v, want %v", c.bin, got, c.want)
		}
	}
	// Bins 2 and 3 are before the window and of the older revision.
	if s := f.Stats(); s.Resent != 3 || s.Repeated != 3 || s.Fenced != 2 || s.Resynced != 0 {
		t.Errorf("stats %+v, want 3 resent, 3 repeated, 2 fenced, none resynced", s)
	}
	f.closeAt("g.0.1", t0.Add(500*time.Millisecond)) // answered: the copies are in
	if !admit(9, 6, 2*time.Second) {
		t.Fatal("live bin 9 refused")
	}
	if admit(5, 6, 2*time.Second) {
		t.Error("copy of bin 5 admitted after the window closed")
	}
	// The next loss asks from its own mark, not the closed window's.
	f.lost(2, t0.Add(2*time.Second))
	if r := f.resendFrom(t0.Add(3 * time.Second)); len(r) != 1 || r[0].after != (Pos{Epoch: 1, Bin: 9}) {
		t.Errorf("requests after the second loss %+v, want one after 1.9.0", r)
	}
}

// TestFenceResendWindowNoMessages: a window opened while no message was
// taken since asks from the last position, and one opened before any
// group was heard asks nothing.
func TestFenceResendWindowNoMessages(t *testing.T) {
	var f Fence
	now := time.Unix(1000, 0)
	f.lost(1, now)
	if r := f.resendFrom(now.Add(time.Second)); len(r) != 0 {
		t.Fatalf("requests %+v before any group was heard", r)
	}
	f.Admit(groupMsg("a.0.1", 10, 1), now)
	f.Admit(groupMsg("b.0.1", 20, 1), now)
	f.lost(2, now)
	r := f.resendFrom(now.Add(time.Second))
	got := map[string]int64{}
	for _, x := range r {
		got[x.group] = x.after.Bin
	}
	if len(got) != 2 || got["a.0.1"] != 10 || got["b.0.1"] != 20 {
		t.Fatalf("requests %+v, want a.0.1 after bin 10 and b.0.1 after bin 20", r)
	}
}

// TestResendHold: decisions taken after a reconnect are held until the
// holder's last copy came, then handed on in position order, whether the
// answer comes before the copies or after them; an answer without copies
// releases at once; a group not held passes.
func TestResendHold(t *testing.T) {
	type step struct {
		bin    int64
		copy   bool
		taken  bool // admitted by the fence
		answer bool // the answer (to bin 8) arrives before this step
	}
	cases := []struct {
		name  string
		steps []step
		want  []int64 // delivered bins after the steps, in order
	}{
		{"answer before the copies", []step{
			{7, false, true, false}, {8, false, true, false},
			{4, true, true, true}, {5, true, true, false}, {6, true, true, false}, {7, true, false, false}, {8, true, false, false},
		}, []int64{4, 5, 6, 7, 8}},
		{"answer after the copies", []step{
			{7, false, true, false}, {4, true, true, false}, {5, true, true, false}, {6, true, true, false},
			{7, true, false, false}, {8, true, true, false},
		}, nil},
	}
	at := func(b int64) Pos { return Pos{Epoch: 1, Bin: b} }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []int64
			h := &resendHold{deliver: func(d *Decisions) { got = append(got, d.Decisions[0].End) }}
			h.mu.Lock()
			h.begin([]string{"g.0.1"})
			h.mu.Unlock()
			for _, s := range c.steps {
				if s.answer {
					h.answered("g.0.1", at(8), true)
				}
				var d *Decisions
				if s.taken {
					d = &Decisions{Decisions: []Decision{{End: s.bin}}}
				}
				h.mu.Lock()
				held := h.take("g.0.1", at(s.bin), d, s.copy)
				h.mu.Unlock()
				if !held && len(got) == 0 {
					t.Fatalf("bin %d not held before the copies were in", s.bin)
				}
			}
			if c.want == nil { // the answer comes last
				if len(got) != 0 {
					t.Fatalf("delivered %v before the answer", got)
				}
				h.answered("g.0.1", at(8), true)
				c.want = []int64{4, 5, 6, 7, 8}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("delivered %v, want %v", got, c.want)
			}
			h.mu.Lock()
			held := h.take("g.0.1", at(9), &Decisions{Decisions: []Decision{{End: 9}}}, false)
			h.mu.Unlock()
			if held {
				t.Error("a message after the release held")
			}
		})
	}
	t.Run("no copies", func(t *testing.T) {
		var got []int64
		h := &resendHold{deliver: func(d *Decisions) { got = append(got, d.Decisions[0].End) }}
		h.mu.Lock()
		h.begin([]string{"g.0.1"})
		h.take("g.0.1", at(9), &Decisions{Decisions: []Decision{{End: 9}}}, false)
		h.take("g.0.1", at(8), &Decisions{Decisions: []Decision{{End: 8}}}, false)
		h.mu.Unlock()
		h.answered("g.0.1", Pos{}, false)
		if !slices.Equal(got, []int64{8, 9}) {
			t.Fatalf("delivered %v, want [8 9]", got)
		}
	})
}
