package standby

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// HandleState handles an admitted state message (processor goroutine): it
// answers a request with the core's state, or restores a received state
// and replays what followed it. restored reports a completed restore; err
// a request not answered or a state not usable (a later one is awaited).
func (r *Replica) HandleState(m *nats.Msg) (restored bool, err error) {
	switch m.Subject {
	case r.snapSubj:
		if !r.synced.Load() || m.Reply == "" {
			return false, nil
		}
		b, err := json.Marshal(r.dev.Snapshot())
		var a *nats.Msg
		if err == nil {
			a, err = stateAnswer(b, r.group.lease, r.group.cfg.Auth, m.Reply)
		}
		if err == nil {
			a.Subject = m.Reply
			err = r.group.nc.PublishMsg(a)
		}
		if err != nil {
			return false, fmt.Errorf("standby: answer a state request: %w", err)
		}
	case r.applySubj:
		if r.synced.Load() {
			return false, nil
		}
		if err := r.restore(m.Data); err != nil {
			return false, fmt.Errorf("standby: holder's state not usable yet: %w", err)
		}
		r.synced.Store(true) // only once the replay completed
		r.restores.Add(1)
		return true, nil
	}
	return false, nil
}

// restore replaces the core's state by the holder's and replays the
// retained messages that followed it. The state lies between two frames
// messages: the retained frames after it are replayed (frames within the
// state skipped); a control message retained next to that point may or
// may not be in the state, so the state is refused and a later one
// awaited. A replay that fails (a panic in the core) is an error: the
// replica stays unsynced and takes the next state.
func (r *Replica) restore(data []byte) (err error) {
	var snap daemon.Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	last := snap.Last
	if !snap.Started {
		last = -1
	}
	before, after := -1, len(r.retained) // last frames message within the state, first past it
	for i, m := range r.retained {
		if m.Subject != r.stimSubj {
			continue
		}
		fs, n, err := stream.PeekFrames(m.Data)
		if err != nil {
			continue
		}
		if !snap.Started || fs+int64(n)-1 > last {
			if fs > last+1 && snap.Started {
				return fmt.Errorf("state at seq %d, the retained frames go on at %d", last, fs)
			}
			after = i
			break
		}
		before = i
	}
	for _, m := range r.retained[before+1 : after] {
		if m.Subject == r.ctlSubj {
			return errors.New("a control message arrived next to the state's last frame")
		}
	}
	if after == len(r.retained) && before+1 < after {
		return errors.New("control messages arrived after the state's last frame")
	}
	if err := r.dev.Restore(&snap); err != nil {
		return err
	}
	r.gate.ResetPos()
	r.gate.Forget()
	r.replaying = true // the replayed decisions go through the gate
	defer func() {
		r.replaying = false
		if p := recover(); p != nil {
			err = fmt.Errorf("replay of the retained messages failed: %v", p)
		}
	}()
	var f stream.Frames
	var c stream.Control
	for _, m := range r.retained[after:] {
		switch m.Subject {
		case r.stimSubj:
			if err := stream.DecodeFrames(m.Data, &f); err != nil {
				continue
			}
			if snap.Started && f.FirstSeq <= last {
				within := last + 1 - f.FirstSeq
				if within >= int64(len(f.Frames)) {
					continue // every frame within the state (resent)
				}
				f.Frames = f.Frames[within:]
				f.FirstSeq = last + 1
			}
			r.dev.Frames(&f)
		case r.ctlSubj:
			if err := stream.DecodeControl(m.Data, &c); err == nil {
				r.dev.Control(&c)
			}
		}
	}
	r.retained, r.retainedBytes = nil, 0
	r.ledger.reset()
	r.digestBlock = -1
	r.dev.Restored()
	return nil
}
