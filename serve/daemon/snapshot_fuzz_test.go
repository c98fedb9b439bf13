package daemon

import (
	"bytes"
	"encoding/json"
	"testing"

	"rgcpred/stream"
)

// FuzzRestore: a snapshot received from a peer (JSON, as a standby reads
// it from the network) is either refused by Restore or restores a core
// that keeps working: it takes frames after its last one without
// panicking, and after a reset serves every cell again on a clean stream.
//
// A whole snapshot is at least 25 KB of JSON (the stimulus ring, its frame
// times and gap marks, 2 * rgc.WindowBins bins each, and a pending history
// of rgc.WindowBins bins per cell), and the fuzzing engine minimises every
// input that finds new code for up to a minute, a byte at a time: from such
// seeds it ran a few executions in 30 s. So an input is the JSON of a
// snapshot with base, a real snapshot (1..4; 0: none), behind it: where the
// input has no stimulus channel, frame times, gap marks or pending
// histories, Restore reads the base's, as if the peer had sent the base's
// JSON with the input's fields after it. The seeds are the real snapshots
// (mid-stream, pending histories, a held candidate numbering) without those
// four fields, and edits of them; an input may still send any field whole.
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
	bases := []*Snapshot{{}}
	for i, before := range []func(c *Core){
		func(c *Core) { c.Control(hist); c.Frames(synthFrames(0, 1500), 0) },
		func(c *Core) { c.Control(hist) },
		func(c *Core) { c.Frames(synthFrames(0, 1200), 0); c.Frames(synthFrames(9000, 5), 0) },
		func(c *Core) {},
	} {
		a, _ := newCore(f, cells, cfg)
		before(a)
		s := a.Snapshot()
		whole, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		bases = append(bases, s)
		part := *s
		part.Stim, part.Times, part.FilledAt, part.Pending = [len(s.Stim)][]float32{}, nil, nil, nil
		b, err := json.Marshal(&part)
		if err != nil {
			f.Fatal(err)
		}
		// The seed over its base is the real snapshot.
		var back Snapshot
		if err := json.Unmarshal(b, &back); err != nil {
			f.Fatal(err)
		}
		onBase(&back, s)
		if again, err := json.Marshal(&back); err != nil || !bytes.Equal(again, whole) {
			f.Fatalf("seed %d over its base is not the snapshot it was cut from (%v)", i, err)
		}
		f.Add(uint8(i+1), b)
		if i > 0 {
			continue
		}
		// Edits of the first: a later key replaces an earlier one.
		for _, edit := range []string{
			`"next":[-5,9223372036854775807,0],"spikes":[[-1],[1000],[]]`,
			`"last":9223372036854775807`,
			`"reset_at":-1`,
			`"stim":[[0.5]]`,
			`"times":[1,2]`,
			`"pending":[[true],null,null]`,
			`"cand_seqs":[1,2,3,4,5,6,7,8],"cand_frames":[{},{},{},{},{},{},{},{}]`,
		} {
			f.Add(uint8(i+1), append(b[:len(b)-1:len(b)-1], ","+edit+"}"...))
		}
	}
	f.Add(uint8(0), []byte(`{"cells":[2,4,7],"next":[-5,9223372036854775807,0],"spikes":[[-1],[1e3],[]],"pending":[null,null,null]}`))
	f.Add(uint8(0), []byte(`{"cells":[2,4,7],"last":9223372036854775807,"started":true}`))
	f.Add(uint8(0), []byte(`null`))
	f.Fuzz(func(t *testing.T, base uint8, data []byte) {
		var s Snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		onBase(&s, bases[int(base)%len(bases)])
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

// onBase gives s the stimulus channels, frame times, gap marks and pending
// histories of base where s has none. s shares them with base; Restore
// only reads them.
func onBase(s, base *Snapshot) {
	for ch := range s.Stim {
		if s.Stim[ch] == nil {
			s.Stim[ch] = base.Stim[ch]
		}
	}
	if s.Times == nil {
		s.Times = base.Times
	}
	if s.FilledAt == nil {
		s.FilledAt = base.FilledAt
	}
	if s.Pending == nil {
		s.Pending = base.Pending
	}
}
