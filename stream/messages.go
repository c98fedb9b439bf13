package stream

import (
	"encoding/binary"

	"rgcpred/rgc"
)

// Frame is one stimulus bin.
type Frame struct {
	// Time is the device's timestamp of the frame in nanoseconds (any clock
	// the device likes; the daemon only echoes it in its decisions).
	Time int64
	// LED holds the four LED intensities (red, green, blue, UV) of the bin,
	// on the scale of rgc.Recording's stimulus.
	LED [rgc.StimChannels]float32
}

// Frames is a batch of consecutive stimulus frames: frame i has sequence
// number (bin index) FirstSeq+i.
type Frames struct {
	// FirstSeq is the sequence number of Frames[0].
	FirstSeq int64
	// Frames holds 1 to MaxFramesPerMsg frames.
	Frames []Frame
}

// LastSeq returns the sequence number of the last frame.
func (f *Frames) LastSeq() int64 { return f.FirstSeq + int64(len(f.Frames)) - 1 }

func checkSeqs(first int64, n int) error {
	if first < 0 || first > MaxSeq || first+int64(n)-1 > MaxSeq {
		return derr(ReasonRange, "sequence numbers %d..%d outside 0..%d", first, first+int64(n)-1, int64(MaxSeq))
	}
	return nil
}

// AppendFrames appends the encoding of f to dst. It checks what the decoder
// checks, so it never produces a payload the daemon rejects.
func AppendFrames(dst []byte, f *Frames) ([]byte, error) {
	n := len(f.Frames)
	if n < 1 || n > MaxFramesPerMsg {
		return dst, derr(ReasonRange, "%d frames, want 1 to %d", n, MaxFramesPerMsg)
	}
	if err := checkSeqs(f.FirstSeq, n); err != nil {
		return dst, err
	}
	for i := range f.Frames {
		for c, v := range f.Frames[i].LED {
			if !finite(v) {
				return dst, derr(ReasonNonFinite, "frame %d LED %d is %v", f.FirstSeq+int64(i), c, v)
			}
		}
	}
	dst = putHeader(dst, TypeFrames, n)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.FirstSeq))
	for i := range f.Frames {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(f.Frames[i].Time))
		for _, v := range f.Frames[i].LED {
			dst = appendF32(dst, v)
		}
	}
	return dst, nil
}

// PeekFrames returns the first sequence number and frame count of a frames
// payload after checking its header and size, without decoding the frames.
func PeekFrames(b []byte) (first int64, n int, err error) {
	n, err = checkHeader(b, TypeFrames, FramesHeaderLen, FrameLen, MaxFramesPerMsg)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, derr(ReasonRange, "frames message with no frames")
	}
	if !zero(b[4:8]) {
		return 0, 0, derr(ReasonReserved, "reserved header bytes 4-7 not zero")
	}
	first = getI64(b[8:])
	if err := checkSeqs(first, n); err != nil {
		return 0, 0, err
	}
	return first, n, nil
}

// DecodeFrames decodes a frames payload into f, reusing f.Frames' storage.
func DecodeFrames(b []byte, f *Frames) error {
	first, n, err := PeekFrames(b)
	if err != nil {
		return err
	}
	if cap(f.Frames) < n {
		f.Frames = make([]Frame, n, max(n, MaxFramesPerMsg/4))
	}
	f.Frames = f.Frames[:n]
	f.FirstSeq = first
	p := b[FramesHeaderLen:]
	for i := range n {
		r := p[i*FrameLen : (i+1)*FrameLen]
		fr := &f.Frames[i]
		fr.Time = getI64(r)
		for c := range fr.LED {
			v := getF32(r[8+4*c:])
			if !finite(v) {
				return derr(ReasonNonFinite, "frame %d LED %d is %v", first+int64(i), c, v)
			}
			fr.LED[c] = v
		}
	}
	return nil
}

// Decision is one prediction of the daemon for one cell.
type Decision struct {
	// Cell is the cell's cluster id.
	Cell int32
	// Kind is KindSpike, KindSilence or KindSkipped.
	Kind uint8
	// Flags holds FlagFilled and FlagModelError bits.
	Flags uint8
	// Epoch is the low 16 bits of the stream epoch the decision belongs to
	// (Event.Epoch, Status.Epoch): decisions of an older epoch are about
	// a stream that no longer exists.
	Epoch uint16
	// End is the bin t that ended the window the model saw.
	End int64
	// Bin is the predicted spike's bin (t+k+1) for KindSpike, or the last
	// bin of the predicted or assumed silence (t+rgc.Horizon) for
	// KindSilence and KindSkipped.
	Bin int64
	// Prob is the model's probability of the predicted class.
	Prob float32
	// FrameTime is the device timestamp of frame End, echoed.
	FrameTime int64
	// DecidedAt is the daemon's wall clock (Unix ns) when it published the
	// decision.
	DecidedAt int64
}

// Decisions is a batch of decisions, typically every decision taken at one
// frame.
type Decisions struct {
	// Decisions holds 1 to MaxDecisionsPerMsg decisions.
	Decisions []Decision
}

func checkDecision(d *Decision) error {
	switch {
	case d.Cell < 0:
		return derr(ReasonRange, "cell %d negative", d.Cell)
	case d.Kind != KindSpike && d.Kind != KindSilence && d.Kind != KindSkipped:
		return derr(ReasonRange, "cell %d: decision kind %d", d.Cell, d.Kind)
	case d.Flags&^decisionFlags != 0:
		return derr(ReasonReserved, "cell %d: unknown decision flags %#x", d.Cell, d.Flags)
	case d.Flags&FlagModelError != 0 && d.Kind != KindSkipped:
		return derr(ReasonRange, "cell %d: model-error flag on a decision of kind %d", d.Cell, d.Kind)
	case d.End < 0 || d.End > MaxSeq:
		return derr(ReasonRange, "cell %d: window end %d outside 0..%d", d.Cell, d.End, int64(MaxSeq))
	case d.Kind == KindSpike && (d.Bin <= d.End || d.Bin > d.End+rgc.Horizon):
		return derr(ReasonRange, "cell %d: spike bin %d not in %d..%d", d.Cell, d.Bin, d.End+1, d.End+rgc.Horizon)
	case d.Kind != KindSpike && d.Bin != d.End+rgc.Horizon:
		return derr(ReasonRange, "cell %d: silence through bin %d, want %d", d.Cell, d.Bin, d.End+rgc.Horizon)
	case !finite(d.Prob):
		return derr(ReasonNonFinite, "cell %d: probability %v", d.Cell, d.Prob)
	case d.Prob < 0 || d.Prob > 1:
		return derr(ReasonRange, "cell %d: probability %v outside [0, 1]", d.Cell, d.Prob)
	}
	return nil
}

// AppendDecisions appends the encoding of d to dst.
func AppendDecisions(dst []byte, d *Decisions) ([]byte, error) {
	n := len(d.Decisions)
	if n < 1 || n > MaxDecisionsPerMsg {
		return dst, derr(ReasonRange, "%d decisions, want 1 to %d", n, MaxDecisionsPerMsg)
	}
	for i := range d.Decisions {
		if err := checkDecision(&d.Decisions[i]); err != nil {
			return dst, err
		}
	}
	dst = putHeader(dst, TypeDecisions, n)
	dst = append(dst, 0, 0, 0, 0)
	for i := range d.Decisions {
		x := &d.Decisions[i]
		dst = binary.LittleEndian.AppendUint32(dst, uint32(x.Cell))
		dst = append(dst, x.Kind, x.Flags)
		dst = binary.LittleEndian.AppendUint16(dst, x.Epoch)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x.End))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x.Bin))
		dst = appendF32(dst, x.Prob)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x.FrameTime))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x.DecidedAt))
	}
	return dst, nil
}

// DecodeDecisions decodes a decisions payload into d, reusing its storage.
func DecodeDecisions(b []byte, d *Decisions) error {
	n, err := checkHeader(b, TypeDecisions, DecisionsHeaderLen, DecisionLen, MaxDecisionsPerMsg)
	if err != nil {
		return err
	}
	if n == 0 {
		return derr(ReasonRange, "decisions message with no decisions")
	}
	if !zero(b[4:8]) {
		return derr(ReasonReserved, "reserved header bytes 4-7 not zero")
	}
	if cap(d.Decisions) < n {
		d.Decisions = make([]Decision, n)
	}
	d.Decisions = d.Decisions[:n]
	p := b[DecisionsHeaderLen:]
	for i := range n {
		r := p[i*DecisionLen : (i+1)*DecisionLen]
		x := &d.Decisions[i]
		x.Cell = int32(binary.LittleEndian.Uint32(r))
		x.Kind = r[4]
		x.Flags = r[5]
		x.Epoch = binary.LittleEndian.Uint16(r[6:])
		x.End = getI64(r[8:])
		x.Bin = getI64(r[16:])
		x.Prob = getF32(r[24:])
		x.FrameTime = getI64(r[28:])
		x.DecidedAt = getI64(r[36:])
		if err := checkDecision(x); err != nil {
			return err
		}
	}
	return nil
}

// History is the initial spike history of one cell: bin j of its first
// window (j = 0 oldest, j = rgc.WindowBins-1 the window's end) holds a spike
// iff Spikes[j].
type History struct {
	// Cell is the cell's cluster id.
	Cell int32
	// Spikes is the spike row of the cell's first window.
	Spikes [rgc.WindowBins]bool
}

// Control is a control message.
type Control struct {
	// Op is OpHistory, OpReset or OpResetAt.
	Op uint8
	// Histories holds 1 to MaxCellsPerMsg histories for OpHistory; it is
	// empty for OpReset and OpResetAt.
	Histories []History
	// Epoch and At place an OpResetAt: it applies before the first frame
	// of stream epoch Epoch whose seq is At or later (0..MaxSeq).
	Epoch uint32
	At    int64
}

// AppendControl appends the encoding of c to dst.
func AppendControl(dst []byte, c *Control) ([]byte, error) {
	n := len(c.Histories)
	switch c.Op {
	case OpReset, OpResetAt:
		if n != 0 {
			return dst, derr(ReasonRange, "reset with %d histories, want 0", n)
		}
		if c.Op == OpResetAt && (c.At < 0 || c.At > MaxSeq) {
			return dst, derr(ReasonRange, "reset at seq %d outside 0..%d", c.At, int64(MaxSeq))
		}
	case OpHistory:
		if n < 1 || n > MaxCellsPerMsg {
			return dst, derr(ReasonRange, "%d histories, want 1 to %d", n, MaxCellsPerMsg)
		}
	default:
		return dst, derr(ReasonRange, "control op %d", c.Op)
	}
	dst = putHeader(dst, TypeControl, n)
	dst = append(dst, c.Op, 0, 0, 0)
	if c.Op == OpResetAt {
		dst = binary.LittleEndian.AppendUint32(dst, c.Epoch)
		dst = append(dst, 0, 0, 0, 0)
		return binary.LittleEndian.AppendUint64(dst, uint64(c.At)), nil
	}
	for i := range c.Histories {
		h := &c.Histories[i]
		if h.Cell < 0 {
			return dst, derr(ReasonRange, "history of cell %d", h.Cell)
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(h.Cell))
		var bits [HistoryBytes]byte
		for j, s := range h.Spikes {
			if s {
				bits[j/8] |= 1 << (j % 8)
			}
		}
		dst = append(dst, bits[:]...)
	}
	return dst, nil
}

// DecodeControl decodes a control payload into c, reusing its storage.
func DecodeControl(b []byte, c *Control) error {
	if len(b) > 4 && b[4] == OpResetAt {
		return decodeResetAt(b, c)
	}
	n, err := checkHeader(b, TypeControl, ControlHeaderLen, HistoryLen, MaxCellsPerMsg)
	if err != nil {
		return err
	}
	if !zero(b[5:8]) {
		return derr(ReasonReserved, "reserved header bytes 5-7 not zero")
	}
	c.Op = b[4]
	c.Epoch, c.At = 0, 0
	switch c.Op {
	case OpReset:
		if n != 0 {
			return derr(ReasonRange, "reset with %d histories, want 0", n)
		}
	case OpHistory:
		if n == 0 {
			return derr(ReasonRange, "history message with no cells")
		}
	default:
		return derr(ReasonRange, "control op %d", c.Op)
	}
	if cap(c.Histories) < n {
		c.Histories = make([]History, n)
	}
	c.Histories = c.Histories[:n]
	p := b[ControlHeaderLen:]
	for i := range n {
		r := p[i*HistoryLen : (i+1)*HistoryLen]
		h := &c.Histories[i]
		cell := binary.LittleEndian.Uint32(r)
		if cell > MaxCellID {
			return derr(ReasonRange, "history %d: cell id %d exceeds %d", i, cell, MaxCellID)
		}
		h.Cell = int32(cell)
		for j := range h.Spikes {
			h.Spikes[j] = r[4+j/8]&(1<<(j%8)) != 0
		}
	}
	return nil
}

// decodeResetAt decodes an OpResetAt control payload (no records, a
// fixed body of ResetAtLen bytes).
func decodeResetAt(b []byte, c *Control) error {
	n, err := checkHeader(b, TypeControl, ResetAtLen, HistoryLen, 0)
	if err != nil {
		return err
	}
	if n != 0 {
		return derr(ReasonRange, "reset with %d histories, want 0", n)
	}
	if !zero(b[5:8]) || !zero(b[12:16]) {
		return derr(ReasonReserved, "reserved bytes of a reset at a frame not zero")
	}
	at := getI64(b[16:])
	if at < 0 || at > MaxSeq {
		return derr(ReasonRange, "reset at seq %d outside 0..%d", at, int64(MaxSeq))
	}
	c.Op, c.Epoch, c.At, c.Histories = OpResetAt, binary.LittleEndian.Uint32(b[8:]), at, c.Histories[:0]
	return nil
}

// Status is the daemon's answer to a status request: which cells of the
// device it serves and how far it got.
type Status struct {
	// LastSeq is the last frame sequence number processed, -1 for none.
	LastSeq int64
	// Shard and Shards are the daemon's shard (index, count), 0 and 1 when
	// it serves every cell.
	Shard, Shards uint16
	// Cells holds the cluster ids the daemon serves for the device,
	// ascending: the k-th is at index Index(k) of the device's whole cell
	// list (all shards together).
	Cells []int32
	// Total is the number of cells of the device over all shards (the
	// whole cell list), 0 if the daemon did not say.
	Total uint16
	// Stagger reports the daemon's start rule: true when cell i of the
	// whole list starts with its first window ending at first + 1023 +
	// rollout.StartOffset(i, Total) = floor(i * 80 / Total) bins, false
	// when every cell's first window ends at first + 1023.
	Stagger bool
	// StimMode is the stimulus mode the daemon expects the device's frames
	// in (predictord --stim); a device whose frames are binned otherwise
	// must not stream to it.
	StimMode rgc.StimMode
	// Epoch counts the streams the daemon started for the device (0: none
	// yet); it grows by one at every EventFirst, EventReset or
	// EventRestart event.
	Epoch uint32
	// First is the sequence number of the current stream's first frame, -1
	// when no stream runs (before the first frame, after a reset).
	First int64
	// Skipped counts KindSkipped decisions published for the device since
	// the daemon started (overload and model errors).
	Skipped uint64
	// Rejected counts messages, frames and histories the daemon rejected
	// for the device since it started (every reason of
	// predictord_frames_rejected_total).
	Rejected uint64
}

// Index returns the index in the device's whole cell list (all shards) of
// Cells[k]: shards serve the cells whose index is Shard mod Shards.
func (s *Status) Index(k int) int { return int(s.Shard) + k*max(int(s.Shards), 1) }

// Flag bits of a status message's byte 22: the start rule, and the
// stimulus mode (unset: rgc.StimCausal, set: rgc.StimZeroPhase).
const (
	statusStagger   = 1
	statusZeroPhase = 2
)

// AppendStatus appends the encoding of s to dst.
func AppendStatus(dst []byte, s *Status) ([]byte, error) {
	n := len(s.Cells)
	if n > MaxCellsPerMsg {
		return dst, derr(ReasonRange, "%d cells exceeds %d", n, MaxCellsPerMsg)
	}
	if s.LastSeq < -1 || s.LastSeq > MaxSeq {
		return dst, derr(ReasonRange, "last sequence number %d", s.LastSeq)
	}
	if s.First < -1 || s.First > MaxSeq {
		return dst, derr(ReasonRange, "first sequence number %d", s.First)
	}
	if s.Shards < 1 || s.Shard >= s.Shards {
		return dst, derr(ReasonRange, "shard %d of %d", s.Shard, s.Shards)
	}
	dst = putHeader(dst, TypeStatus, n)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.LastSeq))
	dst = binary.LittleEndian.AppendUint16(dst, s.Shard)
	dst = binary.LittleEndian.AppendUint16(dst, s.Shards)
	dst = binary.LittleEndian.AppendUint16(dst, s.Total)
	var flags byte
	if s.Stagger {
		flags |= statusStagger
	}
	switch s.StimMode {
	case rgc.StimCausal:
	case rgc.StimZeroPhase:
		flags |= statusZeroPhase
	default:
		return dst, derr(ReasonRange, "stimulus mode %d", s.StimMode)
	}
	dst = append(dst, flags, 0)
	dst = binary.LittleEndian.AppendUint32(dst, s.Epoch)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.First))
	dst = binary.LittleEndian.AppendUint64(dst, s.Skipped)
	dst = binary.LittleEndian.AppendUint64(dst, s.Rejected)
	for _, c := range s.Cells {
		if c < 0 {
			return dst, derr(ReasonRange, "cell %d negative", c)
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(c))
	}
	return dst, nil
}

// DecodeStatus decodes a status payload into s, reusing its storage.
func DecodeStatus(b []byte, s *Status) error {
	n, err := checkHeader(b, TypeStatus, StatusHeaderLen, 4, MaxCellsPerMsg)
	if err != nil {
		return err
	}
	if !zero(b[4:8]) || b[22]&^(statusStagger|statusZeroPhase) != 0 || b[23] != 0 || !zero(b[28:32]) {
		return derr(ReasonReserved, "reserved header bytes not zero")
	}
	s.Epoch = binary.LittleEndian.Uint32(b[24:])
	s.First = getI64(b[32:])
	s.Skipped = binary.LittleEndian.Uint64(b[40:])
	s.Rejected = binary.LittleEndian.Uint64(b[48:])
	if s.First < -1 || s.First > MaxSeq {
		return derr(ReasonRange, "first sequence number %d", s.First)
	}
	s.Total = binary.LittleEndian.Uint16(b[20:])
	s.Stagger = b[22]&statusStagger != 0
	s.StimMode = rgc.StimCausal
	if b[22]&statusZeroPhase != 0 {
		s.StimMode = rgc.StimZeroPhase
	}
	s.LastSeq = getI64(b[8:])
	s.Shard = binary.LittleEndian.Uint16(b[16:])
	s.Shards = binary.LittleEndian.Uint16(b[18:])
	if s.LastSeq < -1 || s.LastSeq > MaxSeq {
		return derr(ReasonRange, "last sequence number %d", s.LastSeq)
	}
	if s.Shards < 1 || s.Shard >= s.Shards {
		return derr(ReasonRange, "shard %d of %d", s.Shard, s.Shards)
	}
	if cap(s.Cells) < n {
		s.Cells = make([]int32, n)
	}
	s.Cells = s.Cells[:n]
	for i := range n {
		c := binary.LittleEndian.Uint32(b[StatusHeaderLen+4*i:])
		if c > MaxCellID {
			return derr(ReasonRange, "cell id %d exceeds %d", c, MaxCellID)
		}
		s.Cells[i] = int32(c)
	}
	return nil
}

// Event is a stream event: the daemon began a new stream (epoch) for the
// device. Every cell's state belongs to the old stream and is gone: each
// cell starts the new stream with an all-zero spike history unless a
// history (OpHistory) for its first window arrives before that window is
// due, so a device that wants its cells to keep their history resends
// them on every event (docs/protocol.md, "Streams and epochs").
type Event struct {
	// Reason is EventFirst, EventReset or EventRestart.
	Reason uint8
	// Epoch is the new stream's epoch (1 for the first stream).
	Epoch uint32
	// First is the sequence number of the new stream's first frame.
	First int64
	// PrevLast is the last sequence number the old stream processed, -1
	// when there was none (the first stream, or a reset before any frame).
	PrevLast int64
}

// AppendEvent appends the encoding of e to dst.
func AppendEvent(dst []byte, e *Event) ([]byte, error) {
	if err := checkEvent(e); err != nil {
		return dst, err
	}
	dst = putHeader(dst, TypeEvent, 0)
	dst = append(dst, e.Reason, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, e.Epoch)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.First))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.PrevLast))
	return dst, nil
}

// DecodeEvent decodes a stream event payload into e.
func DecodeEvent(b []byte, e *Event) error {
	if _, err := checkHeader(b, TypeEvent, EventLen, 1, 0); err != nil {
		return err
	}
	if !zero(b[5:8]) || !zero(b[12:16]) {
		return derr(ReasonReserved, "reserved event bytes not zero")
	}
	e.Reason = b[4]
	e.Epoch = binary.LittleEndian.Uint32(b[8:])
	e.First = getI64(b[16:])
	e.PrevLast = getI64(b[24:])
	return checkEvent(e)
}

func checkEvent(e *Event) error {
	switch {
	case e.Reason < EventFirst || e.Reason > EventRestart:
		return derr(ReasonRange, "event reason %d", e.Reason)
	case e.Epoch == 0:
		return derr(ReasonRange, "event epoch 0")
	case e.First < 0 || e.First > MaxSeq:
		return derr(ReasonRange, "event first sequence number %d", e.First)
	case e.PrevLast < -1 || e.PrevLast > MaxSeq:
		return derr(ReasonRange, "event previous last sequence number %d", e.PrevLast)
	}
	return nil
}
