package nemesis

import (
	"context"
	"reflect"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/serve/recorder"
	"rgcpred/stream"
)

// TestHoles: the spans of the device's frames a recording lacks, dated at
// the device's pace; frames outside the device's span, repeated frames,
// other kinds and malformed messages are left out; every message passes
// on to the reader.
func TestHoles(t *testing.T) {
	frames := func(first int64, n int) recorder.Msg {
		b, err := stream.AppendFrames(nil, &stream.Frames{FirstSeq: first, Frames: make([]stream.Frame, n)})
		if err != nil {
			t.Fatal(err)
		}
		return recorder.Msg{Kind: recorder.KindFrames, Data: b}
	}
	at := func(bins int64) time.Duration {
		return time.Duration(float64(bins) / rgc.BinRateHz * float64(time.Second))
	}
	for _, tc := range []struct {
		name  string
		msgs  []recorder.Msg
		got   int64
		holes []Hole
	}{
		{"complete", []recorder.Msg{frames(100, 50), frames(150, 51)}, 101, nil},
		{"none", nil, 0, []Hole{{From: 100, To: 200, At: 0}}},
		{"a hole and a tail", []recorder.Msg{frames(90, 20), frames(100, 10), {Kind: recorder.KindDecisions, Data: []byte{1}},
			{Kind: recorder.KindFrames, Data: []byte{9, 9}}, frames(130, 40)},
			50, []Hole{{From: 110, To: 129, At: at(110 - 105)}, {From: 170, To: 200, At: at(170 - 105)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := func(_ context.Context, fn func(recorder.Msg) error) error {
				for _, m := range tc.msgs {
					if err := fn(m); err != nil {
						return err
					}
				}
				return nil
			}
			watched, holes := watchFrames(src, 100, 200, 105)
			var n int
			for range 2 { // each read starts again: the last one counts
				if err := watched(context.Background(), func(recorder.Msg) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			got, hs := holes()
			if n != 2*len(tc.msgs) || got != tc.got || !reflect.DeepEqual(hs, tc.holes) {
				t.Fatalf("passed %d of %d messages; got %d %v; want %d %v", n, 2*len(tc.msgs), got, hs, tc.got, tc.holes)
			}
		})
	}
}
