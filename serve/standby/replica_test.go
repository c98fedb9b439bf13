package standby

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/daemon"
	"rgcpred/stream"
)

// coreDevice drives a daemon.Core as a replica's Device.
type coreDevice struct {
	*daemon.Core
	restored int
}

func (c *coreDevice) Frames(f *stream.Frames) { c.Core.Frames(f, 0) }
func (c *coreDevice) Restored()               { c.restored++ }

// nopSink discards a core's output.
type nopSink struct{}

func (nopSink) Decisions(int64, []stream.Decision) {}
func (nopSink) Batch(int, time.Duration)           {}
func (nopSink) Stream(stream.Event)                {}

var testCells = []int{3, 5, 8}

func newCore(t *testing.T, cells []int) *coreDevice {
	t.Helper()
	c, err := daemon.New(fakepred.New(cells), nopSink{}, daemon.Config{Known: cells, Cells: cells, Stagger: true, PublishSilence: true, Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	return &coreDevice{Core: c}
}

// newTestReplica returns an unsynced replica of device dev0 over dev,
// without NATS: its gate publishes nowhere.
func newTestReplica(t *testing.T, dev Device) *Replica {
	t.Helper()
	g, err := NewGate(func(string, stream.Pos, []byte) error { return nil }, func() bool { return false }, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	return &Replica{dev: dev, name: "dev0", gate: g, stimSubj: stream.StimSubject("dev0"), ctlSubj: stream.ControlSubject("dev0"),
		snapSubj: StateSubject("g", "dev0"), applySubj: StateSubject("g", "dev0") + ".apply"}
}

func testFrames(first int64, n int) *stream.Frames {
	f := &stream.Frames{FirstSeq: first, Frames: make([]stream.Frame, n)}
	for i := range f.Frames {
		f.Frames[i].LED[(int(first)+i)%4] = 0.5
	}
	return f
}

func stimMsg(t *testing.T, first int64, n int) *nats.Msg {
	t.Helper()
	b, err := stream.AppendFrames(nil, testFrames(first, n))
	if err != nil {
		t.Fatal(err)
	}
	return &nats.Msg{Subject: stream.StimSubject("dev0"), Data: b}
}

func ctlMsg(t *testing.T, c *stream.Control) *nats.Msg {
	t.Helper()
	b, err := stream.AppendControl(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return &nats.Msg{Subject: stream.ControlSubject("dev0"), Data: b}
}

func snapshotJSON(t *testing.T, c *coreDevice) []byte {
	t.Helper()
	b, err := json.Marshal(c.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplicaRestoreReplay: a joining replica restores the holder's state
// and replays the frames it retained past it, skipping what the state
// already holds (a resent message wholly within it too); it ends with the
// holder's state and counts as synced only after the replay.
func TestReplicaRestoreReplay(t *testing.T) {
	h := stream.History{Cell: 5}
	h.Spikes[1000], h.Spikes[1020] = true, true
	hist := &stream.Control{Op: stream.OpHistory, Histories: []stream.History{h}}
	cases := []struct {
		name   string
		frames [][2]int64 // retained frames messages [from, to); the state ends at frame 1499
	}{
		{"in order", [][2]int64{{1200, 1300}, {1300, 1500}, {1500, 1600}, {1600, 1700}}},
		{"straddling the state", [][2]int64{{1200, 1400}, {1400, 1550}, {1550, 1700}}},
		{"a message resent within the state", [][2]int64{{1200, 1300}, {1300, 1500}, {1500, 1600}, {1350, 1400}, {1600, 1700}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			holder, dev := newCore(t, testCells), newCore(t, testCells)
			r := newTestReplica(t, dev)
			holder.Control(hist)
			holder.Frames(testFrames(0, 1500))
			state := snapshotJSON(t, holder)
			holder.Frames(testFrames(1500, 200))
			for _, fr := range c.frames {
				r.Seen(stimMsg(t, fr[0], int(fr[1]-fr[0])))
			}
			restored, err := r.HandleState(&nats.Msg{Subject: r.applySubj, Data: state})
			if err != nil || !restored || !r.Synced() || r.Restores() != 1 || dev.restored != 1 {
				t.Fatalf("restore: %v, restored %v, synced %v, %d restores, %d Restored calls", err, restored, r.Synced(), r.Restores(), dev.restored)
			}
			if got, want := dev.LastSeq(), holder.LastSeq(); got != want {
				t.Fatalf("last seq %d after the replay, want the holder's %d", got, want)
			}
			if string(snapshotJSON(t, dev)) != string(snapshotJSON(t, holder)) {
				t.Fatal("state after the replay differs from the holder's")
			}
			if r.replaying || len(r.retained) != 0 {
				t.Fatalf("replaying %v, %d messages still retained", r.replaying, len(r.retained))
			}
		})
	}
}

// TestReplicaRestoreRefusals: a joining replica refuses a holder's state
// it cannot continue from exactly (undecodable, of other cells, older than
// its first retained frame, with a control message retained next to its
// last frame) with an error saying why, keeps its own state, stays
// unsynced and counts no restore, so that it takes the next state.
func TestReplicaRestoreRefusals(t *testing.T) {
	holder := newCore(t, testCells)
	holder.Frames(testFrames(0, 1500))
	state := snapshotJSON(t, holder)
	other := newCore(t, []int{3, 5, 9})
	other.Frames(testFrames(0, 1500))
	otherState := snapshotJSON(t, other)
	reset := &stream.Control{Op: stream.OpReset}
	for _, tc := range []struct {
		name     string
		state    []byte
		retained func() []*nats.Msg
		wantErr  string
	}{
		{"undecodable", []byte("{not json"), nil, "decode"},
		{"other cells", otherState, func() []*nats.Msg { return []*nats.Msg{stimMsg(t, 1400, 200)} }, "snapshot of cells"},
		{"gap after the state", state, func() []*nats.Msg { return []*nats.Msg{stimMsg(t, 1600, 100)} }, "the retained frames go on at 1600"},
		{"control next to the last frame", state, func() []*nats.Msg {
			return []*nats.Msg{stimMsg(t, 1400, 100), ctlMsg(t, reset), stimMsg(t, 1500, 100)}
		}, "control message arrived next to the state's last frame"},
		{"control after the last frame, no frames since", state, func() []*nats.Msg { return []*nats.Msg{stimMsg(t, 1400, 100), ctlMsg(t, reset)} },
			"control message arrived next to the state's last frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := newCore(t, testCells)
			r := newTestReplica(t, dev)
			dev.Frames(testFrames(1400, 10)) // the replica's own state
			if tc.retained != nil {
				r.retained = tc.retained()
			}
			before := dev.LastSeq()
			restored, err := r.HandleState(&nats.Msg{Subject: r.applySubj, Data: tc.state})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("HandleState: %v, want %q", err, tc.wantErr)
			}
			if restored || r.Synced() || r.Restores() != 0 || dev.LastSeq() != before || dev.restored != 0 {
				t.Fatalf("after a refused state: restored %v, synced %v, %d restores, last seq %d (was %d)", restored, r.Synced(), r.Restores(), dev.LastSeq(), before)
			}
		})
	}
}

// TestReplicaBudgets: a joining replica's retained messages are bounded by
// bytes, the newest kept; state requests are taken only by a synced
// replica, one per StateEvery and one at a time; a received state waits
// one at a time.
func TestReplicaBudgets(t *testing.T) {
	r := newTestReplica(t, newCore(t, testCells))
	big := make([]byte, 1<<20)
	for i := range maxRetainedBytes>>20 + 8 {
		r.Seen(&nats.Msg{Subject: r.stimSubj, Data: big[:len(big)-i]})
	}
	n := 0
	for _, m := range r.retained {
		n += len(m.Data)
	}
	if r.retainedBytes > maxRetainedBytes || n != r.retainedBytes || len(r.retained[len(r.retained)-1].Data) != len(big)-(maxRetainedBytes>>20+7) {
		t.Fatalf("retained %d bytes (counted %d, bound %d); the newest message not last", n, r.retainedBytes, maxRetainedBytes)
	}

	request := &nats.Msg{Subject: r.snapSubj, Reply: "_INBOX.x"}
	apply := &nats.Msg{Subject: r.applySubj}
	steps := []struct {
		name        string
		synced      bool
		wait        time.Duration
		done        bool // the waiting request was handled first
		msg         *nats.Msg
		ok, limited bool
	}{
		{"unsynced: request not taken", false, 0, false, request, false, false},
		{"synced: taken", true, 0, false, request, true, false},
		{"second within the rate: limited", true, 0, false, request, false, true},
		{"after the rate, one still waiting: limited", true, StateEvery + time.Millisecond, false, request, false, true},
		{"after the rate, none waiting: taken", true, StateEvery + time.Millisecond, true, request, true, false},
		{"a received state: taken", false, 0, false, apply, true, false},
		{"a second received state: not taken", false, 0, false, apply, false, false},
	}
	for _, st := range steps {
		r.synced.Store(st.synced)
		time.Sleep(st.wait)
		if st.done {
			r.Done(request)
		}
		if ok, limited := r.Admit(st.msg); ok != st.ok || limited != st.limited {
			t.Fatalf("%s: admitted %v, limited %v; want %v, %v", st.name, ok, limited, st.ok, st.limited)
		}
	}
	if !r.IsState(r.snapSubj) || !r.IsState(r.applySubj) || r.IsState(r.stimSubj) {
		t.Fatal("IsState does not tell the state subjects")
	}
}
