package stream

import (
	"bytes"
	"encoding/binary"
)

// TypeDrop is a drop notice (daemon -> device, on the events subject):
// messages the device sent were dropped.
const TypeDrop = 6

// DropLen is the length of a drop notice.
const DropLen = 40

// maxDropReason is the longest reason a drop notice carries.
const maxDropReason = DropLen - 16

// What a drop notice is about (byte 4).
const (
	// DropFrames: frames messages were dropped (their frames become a gap).
	DropFrames = 1
	// DropControl: control messages were dropped (resend them).
	DropControl = 2
)

// Drop is a drop notice: Count messages of Kind were dropped for Reason
// (a reason label of predictord_frames_rejected_total) since the previous
// notice of that kind and reason. The daemon sends at most one notice per
// kind and reason every 100 ms.
type Drop struct {
	Kind   uint8
	Count  uint64
	Reason string
}

// AppendDrop appends the encoding of d to dst.
func AppendDrop(dst []byte, d *Drop) ([]byte, error) {
	if err := checkDrop(d); err != nil {
		return dst, err
	}
	dst = putHeader(dst, TypeDrop, 0)
	dst = append(dst, d.Kind, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, d.Count)
	var r [maxDropReason]byte
	copy(r[:], d.Reason)
	return append(dst, r[:]...), nil
}

// DecodeDrop decodes a drop notice into d.
func DecodeDrop(b []byte, d *Drop) error {
	if _, err := checkHeader(b, TypeDrop, DropLen, 1, 0); err != nil {
		return err
	}
	if !zero(b[2:4]) || !zero(b[5:8]) {
		return derr(ReasonReserved, "reserved drop notice bytes not zero")
	}
	r := b[16:]
	if i := bytes.IndexByte(r, 0); i >= 0 {
		if !zero(r[i:]) {
			return derr(ReasonReserved, "drop reason padding not zero")
		}
		r = r[:i]
	}
	d.Kind, d.Count, d.Reason = b[4], binary.LittleEndian.Uint64(b[8:]), string(r)
	return checkDrop(d)
}

func checkDrop(d *Drop) error {
	switch {
	case d.Kind != DropFrames && d.Kind != DropControl:
		return derr(ReasonRange, "drop notice kind %d", d.Kind)
	case d.Count == 0:
		return derr(ReasonRange, "drop notice of no message")
	case d.Reason == "" || len(d.Reason) > maxDropReason:
		return derr(ReasonRange, "drop reason of %d bytes, want 1 to %d", len(d.Reason), maxDropReason)
	}
	for _, c := range []byte(d.Reason) {
		if (c < 'a' || c > 'z') && c != '_' {
			return derr(ReasonRange, "drop reason %q: want [a-z_]", d.Reason)
		}
	}
	return nil
}

// PayloadType returns a payload's message type (byte 1), 0 for a payload
// too short to have one.
func PayloadType(b []byte) byte {
	if len(b) < 2 {
		return 0
	}
	return b[1]
}
