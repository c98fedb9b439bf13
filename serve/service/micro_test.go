package service

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"rgcpred/rgc/fakepred"
	"rgcpred/stream"
)

// microTimeout bounds every request of the micro tests (a busy machine
// answers in milliseconds; the bound only ends a hung test).
const microTimeout = 10 * time.Second

// gather sends req on subject and collects n replies.
func gather(t *testing.T, nc *nats.Conn, subject string, req []byte, n int) []*nats.Msg {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, req); err != nil {
		t.Fatal(err)
	}
	var out []*nats.Msg
	for len(out) < n {
		m, err := sub.NextMsg(microTimeout)
		if err != nil {
			t.Fatalf("%s: %d of %d replies, then %v", subject, len(out), n, err)
		}
		out = append(out, m)
	}
	return out
}

// request sends one request and returns the first reply.
func request(t *testing.T, nc *nats.Conn, subject, body string) *nats.Msg {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), microTimeout)
	if err != nil {
		t.Fatalf("request %s %s: %v", subject, body, err)
	}
	return m
}

// decode decodes a successful JSON reply into v.
func decode(t *testing.T, m *nats.Msg, v any) {
	t.Helper()
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("%s: service error %s %q", m.Subject, code, m.Header.Get(micro.ErrorHeader))
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		t.Fatalf("reply %q: %v", m.Data, err)
	}
}

// TestMicroService runs two instances, shards 0/2 and 1/2 of dev0 (the
// second also serves dev1), and checks discovery, stats, JSON status,
// filters, errors, reset and reload through the micro endpoints.
func TestMicroService(t *testing.T) {
	url := opsNATS(t)
	var failReload atomic.Bool
	cells := []int{1, 2, 3, 4}
	load := func(string, int) (*Model, error) {
		if failReload.Load() {
			return nil, errors.New("checkpoint unreadable")
		}
		return &Model{Predictor: fakepred.New(cells), Cells: cells, Name: "fake"}, nil
	}
	a := opsStart(t, url, Config{Load: load, Shard: 0, Shards: 2, Devices: []string{"dev0"}})
	b := opsStart(t, url, Config{Load: load, Shard: 1, Shards: 2, Devices: []string{"dev0", "dev1"}})
	ids := map[string]*opsRun{a.s.MicroID(): a, b.s.MicroID(): b}
	if len(ids) != 2 || a.s.MicroID() == "" {
		t.Fatalf("instance ids %q and %q: want two distinct", a.s.MicroID(), b.s.MicroID())
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	// Discovery: $SRV.INFO.predictord reaches every instance.
	infoSubj, err := micro.ControlSubject(micro.InfoVerb, MicroName, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range gather(t, nc, infoSubj, nil, 2) {
		var info micro.Info
		decode(t, m, &info)
		r, ok := ids[info.ID]
		if !ok || info.Name != MicroName || info.Version != MicroVersion {
			t.Fatalf("info %+v: unknown instance or wrong name/version", info.ServiceIdentity)
		}
		if got, want := info.Metadata["devices"], strings.Join(r.s.cfg.Devices, ","); got != want {
			t.Errorf("instance %s metadata devices %q, want %q", info.ID, got, want)
		}
		if info.Metadata["cells"] != "2" || info.Metadata["model"] != "fake" {
			t.Errorf("instance %s metadata %v: want 2 cells of model fake", info.ID, info.Metadata)
		}
		var subjects []string
		for _, e := range info.Endpoints {
			subjects = append(subjects, e.Subject)
			if e.QueueGroup != "" {
				t.Errorf("endpoint %s has queue group %q: every instance must receive every request", e.Name, e.QueueGroup)
			}
		}
		slices.Sort(subjects)
		if want := []string{"predictord.info", "predictord.reload", "predictord.reset", "predictord.status"}; !slices.Equal(subjects, want) {
			t.Errorf("endpoint subjects %v, want %v", subjects, want)
		}
	}

	// Frames and one malformed message on dev0 reach both shards.
	p := opsPublisher(t, url, "dev0")
	const sent = 300
	if err := p.PublishFrames(opsFrames(0, sent)); err != nil {
		t.Fatal(err)
	}
	bad := []byte{1, 1}
	wantReason := stream.Reason(stream.DecodeFrames(bad, &stream.Frames{}))
	if err := p.PublishRaw("stim", bad); err != nil {
		t.Fatal(err)
	}
	opsWait(t, microTimeout, "both shards processed the frames and the rejection", func() bool {
		for _, r := range ids {
			st := r.s.Status("dev0")
			if st == nil || st.Devices[0].LastSeq != sent-1 || st.Devices[0].Rejected != 1 {
				return false
			}
		}
		return true
	})

	// Status over NATS, fanned out: both instances answer for dev0.
	for _, m := range gather(t, nc, "predictord.status", []byte(`{"device":"dev0"}`), 2) {
		var st StatusReply
		decode(t, m, &st)
		if _, ok := ids[st.Instance]; !ok || !st.Ready || st.Model != "fake" || len(st.Devices) != 1 {
			t.Fatalf("status %+v: want a ready known instance with one device", st)
		}
		d := st.Devices[0]
		if d.Device != "dev0" || d.Frames != sent || d.LastSeq != sent-1 || d.FirstSeq != 0 || d.Epoch != 1 || d.Cells != 2 {
			t.Errorf("instance %s dev0 %+v: want %d frames from seq 0 in epoch 1, 2 cells", st.Instance, d, sent)
		}
		if d.Rejected != 1 || d.RejectedBy[wantReason] != 1 {
			t.Errorf("instance %s rejected %d by reason %v: want 1 %s", st.Instance, d.Rejected, d.RejectedBy, wantReason)
		}
		if d.FrameAgeSeconds == nil {
			t.Errorf("instance %s: no frame age after frames", st.Instance)
		}
	}
	// Only b serves dev1; its status has not seen frames.
	var st1 StatusReply
	decode(t, request(t, nc, "predictord.status", `{"device":"dev1"}`), &st1)
	if st1.Instance != b.s.MicroID() || len(st1.Devices) != 1 || st1.Devices[0].LastSeq != -1 || st1.Devices[0].FrameAgeSeconds != nil {
		t.Errorf("dev1 status %+v: want instance %s, no frames", st1, b.s.MicroID())
	}

	// Stats carry each instance's device counters.
	statsSubj, _ := micro.ControlSubject(micro.StatsVerb, MicroName, "")
	for _, m := range gather(t, nc, statsSubj, nil, 2) {
		var stats micro.Stats
		decode(t, m, &stats)
		r := ids[stats.ID]
		for _, e := range stats.Endpoints {
			if e.Name != "status" {
				continue
			}
			var data StatsData
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatalf("status endpoint data %q: %v", e.Data, err)
			}
			if len(data.Devices) != len(r.s.cfg.Devices) || data.Devices["dev0"].Frames != sent || data.Cells != 2 {
				t.Errorf("instance %s stats data %+v: want %d devices, dev0 with %d frames", stats.ID, data, len(r.s.cfg.Devices), sent)
			}
			if e.NumRequests < 1 {
				t.Errorf("instance %s status endpoint counted %d requests", stats.ID, e.NumRequests)
			}
		}
	}

	var info InfoReply
	decode(t, request(t, nc, "predictord.info", `{"instance":"`+a.s.MicroID()+`"}`), &info)
	if info.Instance != a.s.MicroID() || !slices.Equal(info.Cells, []int{1, 3}) || info.TotalCells != 4 || info.Shards != 2 ||
		len(info.Devices) != 1 || info.Devices[0].Stim != "rgc.dev0.stim" {
		t.Errorf("info %+v: want instance a serving cells [1 3] of 4 on dev0", info)
	}

	// Errors come in the service-error headers.
	for _, c := range []struct{ subject, body, code string }{
		{"predictord.status", `{"device":`, "400"},
		{"predictord.status", `{"cells":3}`, "400"},
		{"predictord.reset", `{}`, "400"},
	} {
		m := request(t, nc, c.subject, c.body)
		if got := m.Header.Get(micro.ErrorCodeHeader); got != c.code || m.Header.Get(micro.ErrorHeader) == "" {
			t.Errorf("%s %s: error code %q (%q), want %s and a description", c.subject, c.body, got, m.Header.Get(micro.ErrorHeader), c.code)
		}
	}

	// Reset through the endpoint, in order with the frames: the stream
	// ends on the instance addressed, not on the other.
	var rr ResetReply
	decode(t, request(t, nc, "predictord.reset", `{"device":"dev0","instance":"`+a.s.MicroID()+`"}`), &rr)
	if rr.Resets != 1 || rr.Device != "dev0" {
		t.Errorf("reset reply %+v: want the first reset of dev0", rr)
	}
	if d := a.s.Status("dev0").Devices[0]; d.LastSeq != -1 || d.FirstSeq != -1 || d.Resets != 1 {
		t.Errorf("after reset, instance a dev0 %+v: want no stream and 1 reset", d)
	}
	if d := b.s.Status("dev0").Devices[0]; d.LastSeq != sent-1 || d.Resets != 0 {
		t.Errorf("instance b dev0 %+v after a reset addressed to a: want it untouched", d)
	}

	// Reload: a success, then a failure reported as a 500 with the reason.
	var rl ReloadReply
	decode(t, request(t, nc, "predictord.reload", `{"instance":"`+b.s.MicroID()+`"}`), &rl)
	if rl.Instance != b.s.MicroID() || rl.Model != "fake" {
		t.Errorf("reload reply %+v", rl)
	}
	failReload.Store(true)
	m := request(t, nc, "predictord.reload", `{"instance":"`+b.s.MicroID()+`"}`)
	if m.Header.Get(micro.ErrorCodeHeader) != "500" || !strings.Contains(m.Header.Get(micro.ErrorHeader), "checkpoint unreadable") {
		t.Errorf("failed reload: code %q, %q", m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader))
	}

	// The binary device status keeps working beside the micro endpoints.
	ctx, cancel := context.WithTimeout(context.Background(), microTimeout)
	defer cancel()
	if _, err := p.Status(ctx); err != nil {
		t.Errorf("binary status: %v", err)
	}

	// Draining deregisters the endpoints.
	for _, r := range []*opsRun{a, b} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Request("predictord.status", nil, microTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("status after both drained: %v, want no responders", err)
	}
}

func TestParseMicroRequest(t *testing.T) {
	for _, c := range []struct {
		body string
		want MicroRequest
		ok   bool
	}{
		{"", MicroRequest{}, true},
		{"  \n", MicroRequest{}, true},
		{"{}", MicroRequest{}, true},
		{`{"device":"dev0"}`, MicroRequest{Device: "dev0"}, true},
		{`{"device":"dev0","instance":"X"}`, MicroRequest{Device: "dev0", Instance: "X"}, true},
		{`{"device":3}`, MicroRequest{}, false},
		{`{"devices":"dev0"}`, MicroRequest{}, false},
		{`{} {}`, MicroRequest{}, false},
		{`dev0`, MicroRequest{}, false},
	} {
		got, err := parseMicroRequest([]byte(c.body))
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parse %q = %+v, %v; want %+v, ok %v", c.body, got, err, c.want, c.ok)
		}
	}
}
