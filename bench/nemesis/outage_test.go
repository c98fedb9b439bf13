package nemesis

import (
	"reflect"
	"testing"
	"time"

	"rgcpred/bench/history"
)

func TestFrameClock(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	// The history's 1024 frames at once, then about 992 a second; the
	// device falls 200 frames behind in its third second.
	c := newFrameClock(t0, 2024, 21000)
	c.progress(t0.Add(time.Second), 3016)
	c.progress(t0.Add(2*time.Second), 4008)
	c.progress(t0.Add(3*time.Second), 4800)
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{-time.Second, 2023},                 // before the replay: its history
		{0, 2023},                            // the history sent
		{500 * time.Millisecond, 2023 + 495}, // between reports, at the paced rate
		{time.Second, 3015},                  // at a report
		{2900 * time.Millisecond, 4799},      // capped by the next report
		{4 * time.Second, 4799 + 991},        // past the last report
		{time.Minute, 21000},                 // capped by the stretch's end
	} {
		if got := c.frame(t0.Add(tc.at)); got != tc.want {
			t.Errorf("frame at %v = %d, want %d", tc.at, got, tc.want)
		}
	}
	faults := []Fault{
		{Kind: KillNode, At: 1500 * time.Millisecond, Until: 1800 * time.Millisecond},
		{Kind: Outage, At: 1500 * time.Millisecond, Until: 2500 * time.Millisecond},
		{Kind: Outage, Skipped: "the replay ended"},
	}
	want := []history.Span{{From: c.frame(t0.Add(1250 * time.Millisecond)), To: c.frame(t0.Add(5500 * time.Millisecond))}}
	if got := outageSpans(faults, t0, c); !reflect.DeepEqual(got, want) {
		t.Fatalf("outage spans %v, want %v", got, want)
	}
	if want[0].From != 3015+247 || want[0].To != 4799+2479 {
		t.Fatalf("outage span %v", want[0])
	}
}
