package standby

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// Device is one served device as the replication protocol drives it: the
// service's device over its daemon.Core. Every method is called from the
// device's processor goroutine, between messages.
type Device interface {
	// Snapshot returns the core's state.
	Snapshot() *daemon.Snapshot
	// Restore replaces the core's state.
	Restore(s *daemon.Snapshot) error
	// Frames and Control feed the core a replayed message.
	Frames(f *stream.Frames)
	Control(c *stream.Control)
	// Restored is called once a restored state's replay completed.
	Restored()
}

// Bounds of a joining replica's retained messages, kept to replay after
// restoring the holder's state: the oldest go first (the state awaited is
// recent).
const (
	maxRetained      = 1 << 16
	maxRetainedBytes = 64 << 20
)

// StateEvery is how often a synced instance answers a state request at
// most, per device: a snapshot costs the processor far more than a frame.
const StateEvery = 20 * time.Millisecond

// Replica is one device's side of the replication protocol: the gate of
// its decisions, whether its state is the group's, the messages kept to
// replay after a restore, and the budget of state messages.
type Replica struct {
	group *Group
	dev   Device
	name  string
	gate  *Gate
	// raw is the device's message channel: a received state goes to the
	// processor through it.
	raw chan *nats.Msg
	// stimSubj and ctlSubj are the device's inputs; snapSubj receives
	// state requests, applySubj carries a received state to the processor.
	stimSubj, ctlSubj   string
	eventSubj           string
	snapSubj, applySubj string
	// synced: the core's state is the group's (it saw the stream from its
	// start, or restored the holder's state). Only a synced instance
	// publishes, answers state requests or may take the lease.
	synced atomic.Bool
	// replaying: the processor replays the retained messages after a
	// restore; their decisions go through the gate although the instance
	// is not synced yet (processor goroutine only).
	replaying bool
	// retained holds the frames and control messages processed before the
	// instance synced (processor goroutine only).
	retained      []*nats.Msg
	retainedBytes int
	// A state request and a received state waiting for the processor;
	// when the last request was admitted (Unix ns).
	requestQueued, applyQueued atomic.Bool
	lastRequest                atomic.Int64
	restores                   atomic.Uint64
	// The state digests and stream events compared with the holder's
	// (DigestSubject); the epoch and DigestEvery block of the last digest
	// (processor goroutine).
	digestSubj  string
	ledger      ledger
	unconfirmed atomic.Int32 // own restarts the holder has not announced yet
	checked     atomic.Uint64
	holderRead  atomic.Int64 // when holderDigest last read the lease entry (Unix ns)
	digestEpoch uint32
	digestBlock int64
	// resend answers the device's decisions resend requests (holder).
	resend *resender
	// breaks finds the gaps in the device's frames (Arrived; processor
	// goroutine).
	breaks breaks
	// republished is the gate's Republished count last logged (the
	// lease's goroutine, Group.retry).
	republished uint64
}

// Name returns the device's name.
func (r *Replica) Name() string { return r.name }

// Gate returns the gate of the device's decisions and events.
func (r *Replica) Gate() *Gate { return r.gate }

// Synced reports whether the device's state is the group's.
func (r *Replica) Synced() bool { return r.synced.Load() }

// Checked counts the state digests and stream events compared with the
// holder's.
func (r *Replica) Checked() uint64 { return r.checked.Load() }

// Restores counts the holder's states restored.
func (r *Replica) Restores() uint64 { return r.restores.Load() }

// Publish sends a message produced while processing bin of epoch
// (stream.EventBin for a stream event) through the gate; an unsynced
// replica publishes nothing, except while it replays after a restore. A
// message the connection refused (ErrNotConnected) is kept, not an error:
// it goes out once the connection is back (Gate.Retry).
func (r *Replica) Publish(subject string, epoch uint32, bin int64, data []byte) error {
	if !r.synced.Load() && !r.replaying {
		return nil
	}
	if bin == stream.EventBin && !r.replaying && !r.group.lease.Held() {
		if k := (mark{epoch: epoch, bin: bin}); !r.compare(k, data, false) && ownRestart(data) {
			r.awaitRestart(k)
		}
	}
	err := r.gate.Publish(subject, r.gate.Next(epoch, bin), data)
	if errors.Is(err, ErrNotConnected) {
		return nil
	}
	return err
}

// Seen keeps a copy of a frames or control message an unsynced replica
// processes, to replay it after restoring the holder's state.
func (r *Replica) Seen(m *nats.Msg) {
	if r.synced.Load() {
		r.retained, r.retainedBytes = nil, 0 // synced without a restore: nothing to replay
		return
	}
	if m.Subject != r.stimSubj && m.Subject != r.ctlSubj {
		return
	}
	for len(r.retained) > 0 && (len(r.retained) == maxRetained || r.retainedBytes+len(m.Data) > maxRetainedBytes) {
		r.retainedBytes -= len(r.retained[0].Data)
		r.retained[0] = nil
		r.retained = r.retained[1:]
	}
	r.retained = append(r.retained, m)
	r.retainedBytes += len(m.Data)
}

// IsState reports whether subject carries the device's state messages (a
// request, or a received state).
func (r *Replica) IsState(subject string) bool {
	return subject == r.snapSubj || subject == r.applySubj
}

// Admit reports whether a state message may wait for the processor
// (reader goroutine): requests only on a synced instance (an unsynced one
// has no state to give), at most one per StateEvery; one of each at a
// time. limited reports a request refused for the rate.
func (r *Replica) Admit(m *nats.Msg) (ok, limited bool) {
	if m.Subject == r.applySubj {
		return r.applyQueued.CompareAndSwap(false, true), false // else the next try brings another
	}
	if !r.synced.Load() || m.Reply == "" {
		return false, false
	}
	now := time.Now().UnixNano()
	if now-r.lastRequest.Load() < int64(StateEvery) || !r.requestQueued.CompareAndSwap(false, true) {
		return false, true
	}
	r.lastRequest.Store(now)
	return true, false
}

// Done releases an admitted state message's place in its budget.
func (r *Replica) Done(m *nats.Msg) {
	if m.Subject == r.applySubj {
		r.applyQueued.Store(false)
	} else {
		r.requestQueued.Store(false)
	}
}

// ResendStats returns the counters of the device's decisions resend
// requests.
func (r *Replica) ResendStats() ResendStats { return r.resend.Stats() }

// observed handles a message of the group seen on the device's decisions
// or events subject (NATS goroutine): a decisions message is kept to be
// published again, a stream event compared with this replica's.
func (r *Replica) observed(m *nats.Msg, p stream.Pos) {
	if m.Subject == r.eventSubj {
		r.holderEvent(m, p)
		return
	}
	r.resend.observed(m, p)
}

// holderEvent compares a stream event observed from the group (the
// holder's announcement of where a stream starts) with this replica's own
// (NATS goroutine).
func (r *Replica) holderEvent(m *nats.Msg, p stream.Pos) {
	if p.Bin != stream.EventBin || m.Subject != r.eventSubj || r.group.lease.Held() || !r.synced.Load() {
		return
	}
	r.compare(mark{epoch: p.Epoch, bin: p.Bin}, m.Data, true)
}

// Diverged marks a replica whose core left the group's state (a group
// event applied at a frame of its own) unsynced and catches it up again;
// the holder stays as it is. It reports whether it did.
func (r *Replica) Diverged() bool {
	if r.group.lease.Held() || !r.synced.CompareAndSwap(true, false) {
		return false
	}
	r.group.resync(r)
	return true
}

// ownRestart reports whether a stream event (encoded) is a restart: a
// numbering this replica adopted from its own frames, which a replica
// that missed frames adopts where the holder does not.
func ownRestart(data []byte) bool {
	var e stream.Event
	return stream.DecodeEvent(data, &e) == nil && e.Reason == stream.EventRestart
}

// RestartWait is how long a standby waits for the holder to announce a
// restart the standby adopted first; meanwhile it may not take the lease.
const RestartWait = time.Second

// awaitRestart holds a standby's own restart at k until the holder's
// announcement of it arrives. A restart the holder did not announce
// within RestartWait means this replica missed frames (a cut link, a lost
// connection) and adopted a numbering the group did not: its state left
// the group's, so it raises the divergence alarm and catches up again
// rather than take over with it.
func (r *Replica) awaitRestart(k mark) {
	r.unconfirmed.Add(1)
	time.AfterFunc(RestartWait, func() {
		defer r.unconfirmed.Add(-1)
		if !r.ledger.forget(k) {
			return // the holder's arrived and was compared
		}
		r.group.alarm(AlarmDivergence, r.name, fmt.Errorf("standby: restarted the stream in epoch %d on its own, the holder did not within %v: catching up again", k.epoch, RestartWait))
		r.Diverged()
	})
}
