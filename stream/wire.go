// Package stream is predictord's wire protocol over NATS: the subjects of a
// device, the compact little-endian binary payloads (stimulus frames in,
// predicted spikes out, control and status), strict decoders, and the Go
// client a device (or a replay tool, bench or test) uses to talk to the
// daemon. docs/protocol.md is the specification; this file implements it.
//
// Every payload starts with a version byte (Version) and a message type byte.
// Decoders are strict: a wrong version or type, a truncated or oversized
// payload, nonzero reserved bytes, non-finite floats or out-of-range fields
// are errors (a *DecodeError whose Reason names the cause), never a panic.
// Decoding into a reused value allocates nothing after warm-up.
package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"rgcpred/rgc"
)

// Version is the protocol version this package speaks (byte 0 of every
// payload).
const Version = 1

// Message types (byte 1 of every payload).
const (
	// TypeFrames is a batch of consecutive stimulus frames (device -> daemon).
	TypeFrames = 1
	// TypeDecisions is a batch of the daemon's decisions (daemon -> device).
	TypeDecisions = 2
	// TypeControl is a control message (device -> daemon).
	TypeControl = 3
	// TypeStatus is the daemon's reply to a status request.
	TypeStatus = 4
	// TypeEvent is a stream event of the daemon (daemon -> device): a new
	// stream epoch began and every cell's spike history was lost.
	TypeEvent = 5
)

// Limits of the payloads.
const (
	// MaxFramesPerMsg is the most frames one frames message may carry.
	MaxFramesPerMsg = 1024
	// MaxDecisionsPerMsg is the most decisions one decisions message carries.
	MaxDecisionsPerMsg = 4096
	// MaxCellsPerMsg is the most cells one history or status message names.
	MaxCellsPerMsg = 4096
	// MaxSeq is the largest frame sequence number (2^53, so that sequence
	// numbers stay exact in every language's doubles).
	MaxSeq = 1 << 53
	// MaxCellID is the largest cell (cluster) id.
	MaxCellID = math.MaxInt32
	// MinIntensity and MaxIntensity bound the LED intensities the daemon
	// feeds to the model. The nominal range is [0, 1] (rgc.Recording's
	// stimulus scale: LED on/off, low-pass filtered); the margin allows for
	// filter overshoot. The decoder accepts any finite value; the daemon
	// clamps values outside these bounds and counts them.
	MinIntensity = -1
	MaxIntensity = 2
)

// Payload sizes in bytes.
const (
	// FramesHeaderLen is the length of a frames message's header.
	FramesHeaderLen = 16
	// FrameLen is the length of one frame record.
	FrameLen = 8 + 4*rgc.StimChannels
	// DecisionsHeaderLen is the length of a decisions message's header.
	DecisionsHeaderLen = 8
	// DecisionLen is the length of one decision record.
	DecisionLen = 44
	// ControlHeaderLen is the length of a control message's header.
	ControlHeaderLen = 8
	// HistoryBytes is the length of one cell's spike-history bitmap: one bit
	// per bin of a window.
	HistoryBytes = rgc.WindowBins / 8
	// HistoryLen is the length of one history record (cell id + bitmap).
	HistoryLen = 4 + HistoryBytes
	// ResetAtLen is the length of an OpResetAt control message: the
	// header, the epoch (uint32), 4 reserved bytes and the seq (int64).
	ResetAtLen = ControlHeaderLen + 16
	// StatusHeaderLen is the length of a status message's header.
	StatusHeaderLen = 56
	// EventLen is the length of a stream event message.
	EventLen = 32
	// MaxPayload is the largest valid payload of any type (a history
	// message for MaxCellsPerMsg cells).
	MaxPayload = ControlHeaderLen + MaxCellsPerMsg*HistoryLen
)

// Control operations (byte 4 of a control message).
const (
	// OpHistory sets the initial spike history of cells.
	OpHistory = 1
	// OpReset forgets the device's stimulus and every cell's state.
	OpReset = 2
	// OpResetAt is a reset at a named frame: it applies before the first
	// frame of stream epoch Control.Epoch with seq at or past Control.At,
	// so every replica of a hot-standby group and an audit apply it at
	// the same frame wherever it arrives among the frames before that one.
	OpResetAt = 3
)

// Decision kinds.
const (
	// KindSpike: the model predicts the cell's next spike at Bin.
	KindSpike = 1
	// KindSilence: the model predicts no spike in bins End+1 .. Bin
	// (Bin = End + rgc.Horizon).
	KindSilence = 2
	// KindSkipped: the daemon could not decide for the window ending at End
	// (overload, or the model failed: FlagModelError); the cell stepped as
	// if the model had said "no spike" through Bin = End + rgc.Horizon and
	// nothing is predicted for bins End+1 .. Bin.
	KindSkipped = 3
)

// Decision flags (byte 5 of a decision record).
const (
	// FlagFilled marks a decision whose window holds at least one bin the
	// daemon filled by holding the previous frame (a gap in the stream).
	FlagFilled = 1 << 0
	// FlagModelError marks a KindSkipped decision whose window the model
	// failed on (error, panic or an output that is not a distribution),
	// as opposed to one skipped by the overload policy.
	FlagModelError = 1 << 1
	decisionFlags  = FlagFilled | FlagModelError
)

// Stream event reasons (byte 4 of an event message): why a stream epoch
// began.
const (
	// EventFirst: the first frame after the daemon started.
	EventFirst = 1
	// EventReset: the first frame after a reset control message.
	EventReset = 2
	// EventRestart: frames whose numbering does not continue the stream
	// (a gap longer than a window, or a jump back of a window or more) kept
	// arriving with no frame of the old stream among them, so the daemon
	// adopted the new numbering.
	EventRestart = 3
)

// Subjects of a device.

// StimSubject is the subject a device publishes its stimulus frames on.
func StimSubject(device string) string { return "rgc." + device + ".stim" }

// SpikesSubject is the subject the daemon publishes decisions on.
func SpikesSubject(device string) string { return "rgc." + device + ".spikes" }

// ControlSubject is the subject of control messages to the daemon.
func ControlSubject(device string) string { return "rgc." + device + ".ctl" }

// StatusSubject is the request/reply subject of the daemon's status.
func StatusSubject(device string) string { return "rgc." + device + ".status" }

// EventsSubject is the subject the daemon publishes stream events on.
func EventsSubject(device string) string { return "rgc." + device + ".events" }

// CheckDevice reports whether name can be used as a device name: 1 to 64
// characters from [A-Za-z0-9_-] (it becomes one NATS subject token).
func CheckDevice(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("device name %q: want 1 to 64 characters", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("device name %q: character %q not allowed (want [A-Za-z0-9_-])", name, r)
		}
	}
	return nil
}

// Decode error reasons (the Reason of a *DecodeError; also metric labels).
const (
	ReasonVersion   = "version"
	ReasonType      = "type"
	ReasonTruncated = "truncated"
	ReasonOversized = "oversized"
	ReasonLength    = "length"
	ReasonReserved  = "reserved"
	ReasonNonFinite = "non_finite"
	ReasonRange     = "range"
)

// DecodeError is the error of every decoder.
type DecodeError struct {
	// Reason is one of the Reason constants.
	Reason string
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *DecodeError) Error() string { return "stream: " + e.Reason + ": " + e.Msg }

// Reason returns the reason of a *DecodeError in err's chain, or "" if
// there is none.
func Reason(err error) string {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Reason
	}
	return ""
}

func derr(reason, format string, args ...any) error {
	return &DecodeError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// checkHeader checks version, type, minimum and maximum size and returns
// the record count of bytes 2-3.
func checkHeader(b []byte, typ byte, hdr, rec, maxCount int) (int, error) {
	if len(b) > hdr+maxCount*rec {
		return 0, derr(ReasonOversized, "payload of %d bytes exceeds %d", len(b), hdr+maxCount*rec)
	}
	if len(b) < 2 {
		return 0, derr(ReasonTruncated, "payload of %d bytes, want at least %d", len(b), hdr)
	}
	if b[0] != Version {
		return 0, derr(ReasonVersion, "version %d, want %d", b[0], Version)
	}
	if b[1] != typ {
		return 0, derr(ReasonType, "message type %d, want %d", b[1], typ)
	}
	if len(b) < hdr {
		return 0, derr(ReasonTruncated, "payload of %d bytes, want at least %d", len(b), hdr)
	}
	n := int(binary.LittleEndian.Uint16(b[2:]))
	if n > maxCount {
		return 0, derr(ReasonRange, "count %d exceeds %d", n, maxCount)
	}
	if len(b) != hdr+n*rec {
		if len(b) < hdr+n*rec {
			return 0, derr(ReasonTruncated, "payload of %d bytes, want %d for %d records", len(b), hdr+n*rec, n)
		}
		return 0, derr(ReasonLength, "payload of %d bytes, want %d for %d records", len(b), hdr+n*rec, n)
	}
	return n, nil
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func finite(v float32) bool {
	return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
}

func putHeader(dst []byte, typ byte, n int) []byte {
	dst = append(dst, Version, typ)
	return binary.LittleEndian.AppendUint16(dst, uint16(n))
}

func appendF32(dst []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
}

func getF32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

func getI64(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }
