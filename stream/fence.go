package stream

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Headers of the messages a hot-standby group publishes (docs/protocol.md,
// "Hot-standby headers"). A daemon outside a standby group sets none.
const (
	// PosHeader carries a message's Pos ("epoch.bin.index").
	PosHeader = "Rgc-Pos"
	// GroupHeader names the replica group and shard whose holder published
	// the message ("group.shard.shards"); replicas observe only their own.
	GroupHeader = "Rgc-Group"
	// LeaseHeader carries the revision of the group's lease the publisher
	// held (a decimal number); a later holder's revision is higher.
	LeaseHeader = "Rgc-Lease"
)

// Pos orders the messages a hot-standby group publishes for a device: the
// stream epoch, the frame (bin) whose processing produced the message, and
// the message's index among those of that frame. Every replica that
// processed the same frames from the same state gives the same message the
// same Pos.
type Pos struct {
	Epoch uint32
	Bin   int64
	Index int32
}

// EventBin is the Bin of a stream event's message: it comes before every
// decision of its epoch.
const EventBin = math.MinInt64

// Less reports whether p comes before q.
func (p Pos) Less(q Pos) bool {
	if p.Epoch != q.Epoch {
		return p.Epoch < q.Epoch
	}
	if p.Bin != q.Bin {
		return p.Bin < q.Bin
	}
	return p.Index < q.Index
}

// AppendText appends p's header form, "epoch.bin.index".
func (p Pos) AppendText(b []byte) []byte {
	b = strconv.AppendUint(b, uint64(p.Epoch), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, p.Bin, 10)
	b = append(b, '.')
	return strconv.AppendInt(b, int64(p.Index), 10)
}

// String returns p's header form.
func (p Pos) String() string { return string(p.AppendText(nil)) }

// ParsePos parses a header form written by AppendText.
func ParsePos(s string) (Pos, error) {
	a, rest, ok1 := strings.Cut(s, ".")
	b, c, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return Pos{}, fmt.Errorf("position %q: want epoch.bin.index", s)
	}
	e, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return Pos{}, fmt.Errorf("position %q: epoch: %w", s, err)
	}
	bin, err := strconv.ParseInt(b, 10, 64)
	if err != nil {
		return Pos{}, fmt.Errorf("position %q: bin: %w", s, err)
	}
	i, err := strconv.ParseInt(c, 10, 32)
	if err != nil {
		return Pos{}, fmt.Errorf("position %q: index: %w", s, err)
	}
	return Pos{Epoch: uint32(e), Bin: bin, Index: int32(i)}, nil
}

// DefaultFenceHold is Fence.Hold's default: far longer than a new
// holder's burst of re-sent messages, short enough that a forged or
// outdated mark costs a device a few decision periods at most.
const DefaultFenceHold = 250 * time.Millisecond

// FenceStats counts the messages a Fence dropped. Every field only grows.
type FenceStats struct {
	// Repeated counts messages at or before the last position accepted (a
	// new holder re-sending what the old one sent).
	Repeated uint64
	// Fenced counts messages of an older lease revision than one accepted
	// (an old holder's late messages).
	Fenced uint64
	// Resynced counts marks given up because they dropped every message
	// for longer than Hold (a forged header, or a group whose positions
	// restarted).
	Resynced uint64
	// Unfenced counts messages passed unchecked because the fence already
	// keeps MaxFenceGroups groups.
	Unfenced uint64
	// Resent counts messages taken behind the last position accepted: the
	// copies a holder published again for a resend request, each taken
	// once (docs/protocol.md, "Decisions resend").
	Resent uint64
	// Late counts decisions dropped because a later window of their cell
	// was already handed on (a copy or a trailing holder's message that
	// came after it): a decision is taken in its cell's window order or
	// not at all.
	Late uint64
}

// Fence drops, on the device side, the messages of a hot-standby group
// that were already received (a repeated PosHeader) or that come from an
// older holder (a lower LeaseHeader revision than one accepted), keeping
// one mark per GroupHeader (the shards of a device position their messages
// each on their own). Messages without PosHeader always pass. A mark that
// has dropped every message for longer than Hold, with no silence longer
// than Hold between two drops, is given up, so one forged header, or a
// group restarted with lower positions, costs the device at most Hold of
// decisions. A silence starts the count again: a copy that comes after
// the group went quiet (the holder republishing after an outage) is one
// more copy, not a group talking past the mark.
type Fence struct {
	// Hold is how long the mark may go on dropping every message (default
	// DefaultFenceHold).
	Hold time.Duration

	mu    sync.Mutex
	marks map[string]*mark // by GroupHeader: each shard's group positions its own messages
	stats FenceStats
	gen   uint64 // the connection's reconnect count at the last resend window opened
}

// MaxFenceGroups bounds the groups a Fence keeps a mark for; messages of
// further groups pass unfenced (counted in FenceStats.Unfenced).
const MaxFenceGroups = 64

// mark is the last message a Fence accepted from one group.
type mark struct {
	rev       uint64
	last      Pos
	dropSince time.Time // the first drop of the current run of drops, zero none
	dropLast  time.Time // the last drop
	win       *window   // the resend window, nil none
	// cells holds, per cell, the last window handed on (order): none
	// older or equal is handed on after it.
	cells map[int32]cellMark
}

// Admit reports whether the message with header h, received at now, is
// new; it must be called in the order of receipt.
func (f *Fence) Admit(h nats.Header, now time.Time) bool {
	v := h.Get(PosHeader)
	if v == "" {
		return true
	}
	pos, err := ParsePos(v)
	if err != nil {
		return true // not a group's message: the payload decides
	}
	var rev uint64
	if r := h.Get(LeaseHeader); r != "" {
		rev, _ = strconv.ParseUint(r, 10, 64)
	}
	hold := f.Hold
	if hold <= 0 {
		hold = DefaultFenceHold
	}
	group := h.Get(GroupHeader)
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.marks[group]
	if m == nil {
		if len(f.marks) == MaxFenceGroups {
			f.stats.Unfenced++
			return true
		}
		if f.marks == nil {
			f.marks = map[string]*mark{}
		}
		f.marks[group] = &mark{rev: rev, last: pos}
		return true
	}
	if !m.last.Less(pos) && m.win != nil {
		if take, ok := f.admitResent(m, pos, now); ok {
			return take
		}
	}
	fenced := rev < m.rev
	if fenced || !m.last.Less(pos) {
		if m.dropSince.IsZero() || now.Sub(m.dropLast) > hold {
			m.dropSince = now // a silence ends a run of drops: the group was not talking past the mark
		}
		m.dropLast = now
		if now.Sub(m.dropSince) <= hold {
			if fenced {
				f.stats.Fenced++
			} else {
				f.stats.Repeated++
				m.rev = rev // a new holder's copy: its revision fences the old one
			}
			return false
		}
		f.stats.Resynced++
		clear(m.cells) // the group's positions restarted: so did its windows
	}
	m.rev, m.last, m.dropSince = rev, pos, time.Time{}
	if m.win != nil {
		m.noteTaken(pos, now)
	}
	return true
}

// Stats returns the counters.
func (f *Fence) Stats() FenceStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}
