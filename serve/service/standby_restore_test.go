package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// TestStandbyRestoreRefusals: a joining standby refuses a holder's state it
// cannot continue from exactly (undecodable, of other cells, older than
// its first retained frame, with a control message retained after its last
// frame) with an error saying why, keeps its own state, stays
// unsynced and counts no restore, so that it takes the next state.
func TestStandbyRestoreRefusals(t *testing.T) {
	cells := []int{3, 5, 8}
	newDev := func(t *testing.T, ids []int) *device {
		t.Helper()
		s, err := New(Config{Devices: []string{"dev0"}, Log: zerolog.Nop(), Load: func(string, int) (*Model, error) {
			return &Model{Predictor: fakepred.New(ids), Cells: ids, Name: "fake"}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s.devices[0]
	}
	frames := func(first int64, n int) *stream.Frames {
		f := &stream.Frames{FirstSeq: first, Frames: make([]stream.Frame, n)}
		for i := range f.Frames {
			f.Frames[i].LED[i%4] = 0.5
		}
		return f
	}
	// The holder's state after frames 0..1499.
	holder := newDev(t, cells)
	holder.core.Frames(frames(0, 1500), 0)
	state, err := json.Marshal(holder.core.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	other := newDev(t, []int{3, 5, 9})
	other.core.Frames(frames(0, 1500), 0)
	otherState, err := json.Marshal(other.core.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	stim := func(d *device, first int64, n int) *nats.Msg {
		b, err := stream.AppendFrames(nil, frames(first, n))
		if err != nil {
			t.Fatal(err)
		}
		return &nats.Msg{Subject: d.stimSubj, Data: b}
	}
	ctl := func(d *device) *nats.Msg {
		b, err := stream.AppendControl(nil, &stream.Control{Op: stream.OpReset})
		if err != nil {
			t.Fatal(err)
		}
		return &nats.Msg{Subject: d.ctlSubj, Data: b}
	}
	for _, tc := range []struct {
		name     string
		state    []byte
		retained func(d *device) []*nats.Msg
		wantErr  string
	}{
		{"undecodable", []byte("{not json"), nil, "decode"},
		{"other cells", otherState, func(d *device) []*nats.Msg { return []*nats.Msg{stim(d, 1400, 200)} }, "snapshot of cells"},
		{"gap after the state", state, func(d *device) []*nats.Msg { return []*nats.Msg{stim(d, 1600, 100)} }, "the retained frames go on at 1600"},
		{"control next to the last frame", state, func(d *device) []*nats.Msg {
			return []*nats.Msg{stim(d, 1400, 100), ctl(d), stim(d, 1500, 100)}
		}, "control message arrived next to the state's last frame"},
		{"control after the last frame, no frames since", state, func(d *device) []*nats.Msg { return []*nats.Msg{stim(d, 1400, 100), ctl(d)} },
			"control message arrived next to the state's last frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDev(t, cells)
			d.sb.on, d.sb.applySubj = true, "standby.apply"
			d.core.Frames(frames(1400, 10), 0) // the standby's own state
			if tc.retained != nil {
				d.sb.retained = tc.retained(d)
			}
			before := d.core.LastSeq()
			d.standbyMsg(&nats.Msg{Subject: d.sb.applySubj, Data: tc.state})
			if d.sb.synced.Load() || d.sb.restores.Load() != 0 || d.core.LastSeq() != before {
				t.Fatalf("after a refused state: synced %v, %d restores, last seq %d (was %d)", d.sb.synced.Load(), d.sb.restores.Load(), d.core.LastSeq(), before)
			}
			if err := d.restore(tc.state); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("restore: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
