package recorder

import (
	"bytes"
	"slices"
	"sync"
	"testing"

	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
)

// FuzzAuditSession: the audit reads the session header recorded with a
// session (JSON written by the daemon, but read back from a stream anyone
// with access may publish to). Whatever its bytes, the audit of an
// otherwise real recording returns a report or an error, never panics;
// the recording as recorded audits clean.
func FuzzAuditSession(f *testing.F) {
	f.Add([]byte(`{"model":"fake","cells":[3,5,8,13,21,34],"stagger":false,"publish_silence":true,"max_lag":0,"started":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"cells":[3,5,8,13,21,34],"all":[3,5,8,13,21,34,55],"stagger":true,"publish_silence":true,"policy":"sample:7","precision":"int8"}`))
	f.Add([]byte(`{"cells":[-1,3,3,9223372036854775807],"all":[],"policy":"threshold:/nonexistent"}`))
	f.Add([]byte(`{"cells":null,"policy":"nonsense"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	var (
		once sync.Once
		msgs []Msg
		head int // index of the session header in msgs
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		once.Do(func() {
			_, nc, js := embedtest.JetStream(t, embednats.Options{})
			record(t, nc, js, session{silence: true, streams: []int{1200}, seed: 3}, Config{Stream: "REC", Devices: []string{dev}})
			msgs = readAll(t, StreamSource(js, "REC", dev))
			rep, err := Audit(ctxT(t), MemorySource(msgs), AuditConfig{Predictor: fakepred.New(testCells)})
			if err != nil || !rep.OK() {
				t.Fatalf("the unedited recording does not audit clean: %v, %+v", err, rep)
			}
			head = slices.IndexFunc(msgs, func(m Msg) bool { return m.Kind == KindSession })
		})
		if head < 0 {
			t.Fatal("no session header recorded")
		}
		edited := slices.Clone(msgs)
		edited[head].Data = data
		rep, err := Audit(ctxT(t), MemorySource(edited), AuditConfig{Predictor: fakepred.New(testCells)})
		if err == nil && rep == nil {
			t.Fatal("no report and no error")
		}
		if bytes.Equal(data, msgs[head].Data) && (err != nil || !rep.OK()) {
			t.Fatalf("the recorded session header does not audit clean: %v, %+v", err, rep)
		}
	})
}
