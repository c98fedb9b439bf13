package service

import (
	"fmt"
	"testing"
	"time"

	"rgcpred/stream"
)

// TestSinkTiming: each decision is reported with the arrival of its
// message, its model call and its publication; a skipped decision, or one
// after no call, has no call (batch 0, the call's times at arrival).
func TestSinkTiming(t *testing.T) {
	t0 := time.Unix(100, 0)
	k := &sink{d: &device{name: "dev7"}, at: t0, callN: 3, callStart: t0.Add(time.Millisecond), callEnd: t0.Add(2 * time.Millisecond)}
	ds := []stream.Decision{{Cell: 4, End: 900, Kind: stream.KindSpike}, {Cell: 5, End: 901, Kind: stream.KindSkipped}}
	var got []DecisionTiming
	now := t0.Add(3 * time.Millisecond)
	k.timing(func(dt DecisionTiming) { got = append(got, dt) }, ds, now)
	want := []DecisionTiming{
		{Device: "dev7", Cell: 4, End: 900, Batch: 3, Arrived: t0, CallStart: t0.Add(time.Millisecond), CallEnd: t0.Add(2 * time.Millisecond), Published: now},
		{Device: "dev7", Cell: 5, End: 901, Batch: 0, Arrived: t0, CallStart: t0, CallEnd: t0, Published: now},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("timings\n%v\nwant\n%v", got, want)
	}
	k.callN = 0 // decisions after no call
	got = got[:0]
	k.timing(func(dt DecisionTiming) { got = append(got, dt) }, ds[:1], now)
	if len(got) != 1 || got[0].Batch != 0 || got[0].CallStart != t0 || got[0].CallEnd != t0 {
		t.Fatalf("after no call: %+v, want batch 0 and the call's times at arrival", got)
	}
}
