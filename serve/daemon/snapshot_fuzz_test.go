package daemon

import (
	"encoding/json"
	"testing"

	"rgcpred/stream"
)

// FuzzRestore: a snapshot received from a peer (JSON, as a standby reads
// it from the network) is either refused by Restore or restores a core
// that keeps working: it takes frames after its last one without
// panicking, and after a reset serves every cell again on a clean stream.
// The seeds are real snapshots (mid-stream, pending histories, a held
// candidate numbering) and edits of them.
func FuzzRestore(f *testing.F) {
	cells := []int{2, 4, 7}
	hist := &stream.Control{Op: stream.OpHistory}
	for i, c := range cells {
		h := stream.History{Cell: int32(c)}
		for j := range h.Spikes {
			h.Spikes[j] = (j+i)%97 == 0
		}
		hist.Histories = append(hist.Histories, h)
	}
	cfg := Config{PublishSilence: true, ConfirmFrames: 8}
	for _, before := range []func(c *Core){
		func(c *Core) { c.Control(hist); c.Frames(synthFrames(0, 1500), 0) },
		func(c *Core) { c.Control(hist) },
		func(c *Core) { c.Frames(synthFrames(0, 1200), 0); c.Frames(synthFrames(9000, 5), 0) },
		func(c *Core) {},
	} {
		a, _ := newCore(f, cells, cfg)
		before(a)
		b, err := json.Marshal(a.Snapshot())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"cells":[2,4,7],"next":[-5,9223372036854775807,0],"spikes":[[-1],[1e3],[]],"pending":[null,null,null]}`))
	f.Add([]byte(`{"cells":[2,4,7],"last":9223372036854775807,"started":true}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		r, sink := newCore(t, cells, cfg)
		if err := r.Restore(&s); err != nil {
			return
		}
		next := r.LastSeq() + 1
		if next >= 0 && next <= stream.MaxSeq-300 {
			r.Frames(synthFrames(next, 300), 0)
		}
		r.Control(&stream.Control{Op: stream.OpReset})
		r.Control(hist)
		n := len(sink.got)
		r.Frames(synthFrames(100, 1200), 0)
		seen := map[int32]bool{}
		for _, d := range sink.got[n:] {
			seen[d.Cell] = true
		}
		if len(seen) != len(cells) {
			t.Fatalf("after a restore, a reset and a clean stream, decisions for %d of %d cells", len(seen), len(cells))
		}
	})
}
