package daemon

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
)

// Digest returns the SHA-256 of every field of the snapshot in a fixed
// binary form: two cores of the same configuration whose snapshots digest
// the same take the same decisions from the next frame on. It costs far
// less than encoding the snapshot (a hot-standby group compares digests
// while serving).
func (s *Snapshot) Digest() [sha256.Size]byte {
	var b []byte
	i64 := func(v int64) { b = binary.LittleEndian.AppendUint64(b, uint64(v)) }
	f32 := func(v float32) { b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v)) }
	bit := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	i64s := func(vs []int64) {
		i64(int64(len(vs)))
		for _, v := range vs {
			i64(v)
		}
	}
	i64(int64(len(s.Cells)))
	for _, c := range s.Cells {
		i64(int64(c))
	}
	bit(s.Started)
	i64(int64(s.Epoch))
	i64(int64(s.Reason))
	i64(s.First)
	i64(s.Last)
	i64(s.Prev)
	i64(s.Filled)
	for _, v := range s.Held {
		f32(v)
	}
	i64(s.HeldT)
	for _, ch := range s.Stim {
		i64(int64(len(ch)))
		for _, v := range ch {
			f32(v)
		}
	}
	i64s(s.Times)
	i64s(s.FilledAt)
	i64s(s.Next)
	i64(int64(len(s.Spikes)))
	for _, sp := range s.Spikes {
		i64s(sp)
	}
	i64(int64(len(s.Pending)))
	for _, p := range s.Pending {
		bit(p != nil)
		i64(int64(len(p)))
		for _, v := range p {
			bit(v)
		}
	}
	bit(s.ResetAt != nil)
	if s.ResetAt != nil {
		i64(*s.ResetAt)
	}
	i64s(s.CandSeqs)
	i64(int64(len(s.CandFrames)))
	for _, f := range s.CandFrames {
		i64(f.Time)
		for _, v := range f.LED {
			f32(v)
		}
	}
	return sha256.Sum256(b)
}
