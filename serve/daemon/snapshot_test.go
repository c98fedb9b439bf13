package daemon

import (
	"encoding/json"
	"slices"
	"testing"

	"rgcpred/rgc"
	"rgcpred/stream"
)

// TestSnapshotRestoreContinues: a fresh core restored from another core's
// snapshot (through JSON, as a standby receives it) takes, from the next
// frame on, exactly the decisions and stream events the original takes.
func TestSnapshotRestoreContinues(t *testing.T) {
	cells := []int{2, 4, 7, 11, 12}
	hist := &stream.Control{Op: stream.OpHistory}
	for i, c := range cells[:3] {
		h := stream.History{Cell: int32(c)}
		for j := range h.Spikes {
			h.Spikes[j] = (j+i)%97 == 0
		}
		hist.Histories = append(hist.Histories, h)
	}
	cases := []struct {
		name string
		cfg  Config
		// before runs before the snapshot, after on both cores after it.
		before, after func(c *Core)
	}{
		{"mid-stream", Config{PublishSilence: true},
			func(c *Core) { c.Control(hist); c.Frames(synthFrames(0, 2500), 0) },
			func(c *Core) { c.Frames(synthFrames(2500, 2000), 0) }},
		{"staggered with gap", Config{Stagger: true, PublishSilence: true},
			func(c *Core) { c.Frames(synthFrames(10, 1500), 0) },
			func(c *Core) { c.Frames(synthFrames(1530, 1500), 0) }},
		{"pending histories before the first frame", Config{},
			func(c *Core) { c.Control(hist) },
			func(c *Core) { c.Frames(synthFrames(0, 3000), 0) }},
		{"candidate numbering held", Config{PublishSilence: true, ConfirmFrames: 8},
			func(c *Core) { c.Frames(synthFrames(0, 1500), 0); c.Frames(synthFrames(9000, 5), 0) },
			func(c *Core) { c.Frames(synthFrames(9005, 2000), 0) }},
		{"after a reset", Config{PublishSilence: true},
			func(c *Core) {
				c.Frames(synthFrames(0, 1500), 0)
				c.Control(&stream.Control{Op: stream.OpReset})
				c.Control(hist)
			},
			func(c *Core) { c.Frames(synthFrames(100, 2000), 0) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, as := newCore(t, cells, tc.cfg)
			tc.before(a)
			b, err := json.Marshal(a.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			var snap Snapshot
			if err := json.Unmarshal(b, &snap); err != nil {
				t.Fatal(err)
			}
			r, rs := newCore(t, cells, tc.cfg)
			if err := r.Restore(&snap); err != nil {
				t.Fatal(err)
			}
			if r.LastSeq() != a.LastSeq() || r.Epoch() != a.Epoch() || r.First() != a.First() {
				t.Fatalf("restored at seq %d epoch %d first %d, want %d %d %d", r.LastSeq(), r.Epoch(), r.First(), a.LastSeq(), a.Epoch(), a.First())
			}
			n, ne := len(as.got), len(as.events)
			tc.after(a)
			tc.after(r)
			want, got := as.got[n:], rs.got
			if len(want) < 10 {
				t.Fatalf("only %d decisions after the snapshot: the case tests little", len(want))
			}
			if !sameDecisions(got, want) || !slices.Equal(rs.events, as.events[ne:]) {
				t.Fatalf("restored core: %d decisions %v events, want %d, %v", len(got), rs.events, len(want), as.events[ne:])
			}
			for i := range got {
				if got[i].Epoch != want[i].Epoch || got[i].Flags != want[i].Flags || got[i].FrameTime != want[i].FrameTime {
					t.Fatalf("decision %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

func TestRestoreRejects(t *testing.T) {
	a, _ := newCore(t, []int{1, 2}, Config{})
	a.Frames(synthFrames(0, 1100), 0)
	good := a.Snapshot()
	edit := func(f func(s *Snapshot)) *Snapshot {
		b, _ := json.Marshal(good)
		var s Snapshot
		_ = json.Unmarshal(b, &s)
		f(&s)
		return &s
	}
	cases := map[string]*Snapshot{
		"other cells":     edit(func(s *Snapshot) { s.Cells = []int{1, 3} }),
		"short states":    edit(func(s *Snapshot) { s.Next = s.Next[:1] }),
		"short stimulus":  edit(func(s *Snapshot) { s.Stim[2] = s.Stim[2][:rgc.WindowBins-1] }),
		"bad pending":     edit(func(s *Snapshot) { s.Pending[0] = make([]bool, 3) }),
		"oversized cand":  edit(func(s *Snapshot) { s.CandSeqs = make([]int64, 40); s.CandFrames = make([]stream.Frame, 40) }),
		"mismatched cand": edit(func(s *Snapshot) { s.CandSeqs = make([]int64, 2) }),
	}
	for name, s := range cases {
		r, _ := newCore(t, []int{1, 2}, Config{})
		if err := r.Restore(s); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
	r, _ := newCore(t, []int{1, 2}, Config{})
	if err := r.Restore(good); err != nil {
		t.Fatal(err)
	}
}
