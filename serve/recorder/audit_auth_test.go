package recorder

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"rgcpred/base/msgauth"
	"rgcpred/rgc/fakepred"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// signAs returns m with its authenticator under key over subject (a
// frames or control message, stamped with a sending time from *clock).
func signAs(t *testing.T, m Msg, key []byte, subject string, clock *int64) Msg {
	t.Helper()
	a, err := stream.NewAuth(key)
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	for k, v := range m.Header {
		h[k] = slices.Clone(v)
	}
	*clock++
	h.Set(stream.TimeHeader, strconv.FormatInt(*clock, 10))
	nm := &nats.Msg{Subject: subject, Data: m.Data, Header: h}
	a.Sign(nm)
	m.Header = nm.Header
	return m
}

// signDevice returns msgs with every frames and control message signed
// as the device signs it, under key.
func signDevice(t *testing.T, msgs []Msg, key []byte, clock *int64) []Msg {
	t.Helper()
	out := slices.Clone(msgs)
	for i, m := range out {
		if m.Kind == KindFrames || m.Kind == KindControl {
			out[i] = signAs(t, m, key, m.Subject, clock)
		}
	}
	return out
}

// answerFills returns the messages of span (frames, and what came between
// them) as a Filler stores them when the frames came in resend answers of
// per frames each: every frames message signed under key over the
// answer's subject (reply(first, n)), the subject named in
// FillAnswerHeader unless bare; placed after the recorded message after,
// with sequence numbers from seq on.
func answerFills(t *testing.T, span []Msg, per int, key []byte, reply func(first int64, n int) string, bare bool,
	after, seq uint64, clock *int64) []Msg {
	t.Helper()
	answers := rebatch(t, span, per)
	subjects := make([]string, len(answers))
	for i, m := range answers {
		if m.Kind != KindFrames {
			continue
		}
		first, n, err := stream.PeekFrames(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		subjects[i] = reply(first, n)
		answers[i] = signAs(t, m, key, subjects[i], clock)
	}
	fills := fillsOf(answers, after, seq)
	for i := range fills {
		if subjects[i] != "" && !bare {
			fills[i].Header.Set(FillAnswerHeader, subjects[i])
		}
	}
	return fills
}

// TestAuditAuthenticatedFills: with message keys, the audit admits a
// hole filled with the recorded messages' own authenticators, and frames
// filled from resend answers under the answer's authenticator, checked
// over the answer's subject, whose request must hold the frames (also
// when frames read already are cut from an answer's head). It refuses
// answers filled without their subject, answers naming other frames, and
// answers signed with another key: the replay then lacks their frames
// and differs from the recording.
func TestAuditAuthenticatedFills(t *testing.T) {
	_, nc, js := embedtest.JetStream(t, embednats.Options{})
	record(t, nc, js, session{silence: true, streams: []int{4000, 1500}, seed: 7}, Config{Stream: "REC", Devices: []string{dev}})
	up, other := bytes.Repeat([]byte{1}, msgauth.KeyLen), bytes.Repeat([]byte{2}, msgauth.KeyLen)
	var clock int64
	all := signDevice(t, startsAfter(t, readAll(t, StreamSource(js, "REC", dev))), up, &clock)
	last := all[len(all)-1].Seq
	// The first stream's frames are 100..4099, 8 to a message.
	kept, gone := cutFrames(all, 2100, 2899)
	after := kept[framesAt(all, 2100)-1].Seq
	inbox := func(first int64, n int) string { return fmt.Sprintf("_INBOX.daemon.%d.%d", first, n) }
	elsewhere := func(int64, int) string { return "_INBOX.daemon.0.8" }
	// An answer of frames 2092..2107, the first 8 recorded: they are cut
	// from its head, and the same frames from the head of the answer
	// after it.
	overlap := slices.DeleteFunc(slices.Clone(all[framesAt(all, 2092):framesAt(all, 2108)]), func(m Msg) bool { return m.Kind != KindFrames })
	answered := 0
	for _, m := range rebatch(t, gone, 200) {
		if m.Kind == KindFrames {
			answered++
		}
	}
	for _, tc := range []struct {
		name    string
		msgs    []Msg
		verdict string
		refused int // auth_invalid
		answers int // filled frames messages a resend answer brought that the replay read (an overlap's are not)
	}{
		{"complete", all, "PASS", 0, 0},
		{"a hole filled with the recorded authenticators", slices.Concat(kept, fillsOf(gone, after, last+1)), "PASS", 0, 0},
		{"a hole filled from resend answers", slices.Concat(kept, answerFills(t, gone, 200, up, inbox, false, after, last+1, &clock)), "PASS", 0, answered},
		{"resend answers overlapping frames read already", slices.Concat(kept,
			answerFills(t, overlap, 16, up, inbox, false, after, last+1, &clock),
			answerFills(t, gone, 200, up, inbox, false, after, last+2, &clock)), "PASS", 0, answered},
		{"resend answers filled without their subject", slices.Concat(kept,
			answerFills(t, gone, 200, up, inbox, true, after, last+1, &clock)), "FAIL", answered, 0},
		{"resend answers naming other frames", slices.Concat(kept,
			answerFills(t, gone, 200, up, elsewhere, false, after, last+1, &clock)), "FAIL", answered, answered},
		{"resend answers under another key", slices.Concat(kept,
			answerFills(t, gone, 200, other, inbox, false, after, last+1, &clock)), "FAIL", answered, answered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Audit(ctxT(t), Merge(MemorySource(tc.msgs), dev), AuditConfig{Predictor: fakepred.New(testCells), UpKey: up})
			if err != nil {
				t.Fatal(err)
			}
			got := rep.String()
			if !strings.HasPrefix(got, "audit "+tc.verdict) {
				t.Fatalf("verdict %q, want %s:\n%s", strings.SplitN(got, "\n", 2)[0], tc.verdict, got)
			}
			if n := int(rep.Refused[stream.ReasonAuthInvalid]); n != tc.refused || rep.Refusals() != uint64(tc.refused) {
				t.Fatalf("refused %v, want %d auth_invalid only:\n%s", rep.Refused, tc.refused, got)
			}
			if rep.FilledAnswers != uint64(tc.answers) {
				t.Fatalf("%d filled messages from resend answers read, want %d:\n%s", rep.FilledAnswers, tc.answers, got)
			}
		})
	}
}
