package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rgcpred/rgc"
)

func TestDurationsSummary(t *testing.T) {
	var d Durations
	if s := d.Summary(); s != (DurationSummary{}) {
		t.Fatalf("empty summary %+v", s)
	}
	// 1..1000 µs: p50 = 500 µs, p99 = 990 µs, p99.9 = 999 µs, max 1 ms.
	for i := 1000; i >= 1; i-- {
		d.Add(time.Duration(i) * time.Microsecond)
	}
	s := d.Summary()
	want := DurationSummary{N: 1000, MeanMs: 0.5005, P50Ms: 0.5, P99Ms: 0.99, P999Ms: 0.999, MaxMs: 1}
	if s.N != want.N || !near(s.MeanMs, want.MeanMs) || !near(s.P50Ms, want.P50Ms) || !near(s.P99Ms, want.P99Ms) ||
		!near(s.P999Ms, want.P999Ms) || !near(s.MaxMs, want.MaxMs) {
		t.Fatalf("summary %+v, want %+v", s, want)
	}
}

func TestDurationsOver(t *testing.T) {
	var d Durations
	if got := d.Over(time.Millisecond); got != 0 {
		t.Fatalf("empty: %v over, want 0", got)
	}
	for i := 1; i <= 1000; i++ { // 1..1000 µs
		d.Add(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		bound time.Duration
		want  float64
	}{{0, 1}, {time.Microsecond, 0.999}, {990 * time.Microsecond, 0.01}, {time.Millisecond, 0}} {
		if got := d.Over(tc.bound); !near(got, tc.want) {
			t.Errorf("Over(%v) = %v, want %v", tc.bound, got, tc.want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestLateTracker(t *testing.T) {
	start := time.Unix(100, 0)
	p, _ := NewPacer(SystemClock{}, start, 1)
	lt := NewLateTracker(p)
	cases := []struct {
		frame   int64
		arrived time.Time
		late    bool
		by      time.Duration
	}{
		{10, p.Due(10).Add(-time.Millisecond), false, 0}, // ahead of time
		{10, p.Due(10), false, 0},                        // exactly on its deadline
		{20, p.Due(20).Add(time.Microsecond), true, time.Microsecond},
		{5, p.Due(5).Add(3 * time.Millisecond), true, 3 * time.Millisecond},
	}
	for i, c := range cases {
		late, by := lt.Spike(c.frame, c.arrived)
		if late != c.late || by != c.by {
			t.Errorf("case %d: late %v by %v, want %v by %v", i, late, by, c.late, c.by)
		}
	}
	s := lt.Summary()
	if s.Spikes != 4 || s.Late != 2 || !s.Paced || s.Lateness.N != 2 || !near(s.Lateness.MaxMs, 3) {
		t.Fatalf("summary %+v", s)
	}
	un := NewLateTracker(nil)
	if late, _ := un.Spike(3, time.Unix(0, 0)); late {
		t.Fatal("unpaced spike reported late")
	}
	if s := un.Summary(); s.Paced || s.Late != 0 || s.Spikes != 1 {
		t.Fatalf("unpaced summary %+v", s)
	}
}

func TestCountVector(t *testing.T) {
	got := CountVector([]int{3, 5, 5, 9, 10, 2}, 3, 10)
	want := []float64{1, 0, 2, 0, 0, 0, 1}
	if len(got) != len(want) {
		t.Fatalf("len %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("counts %v, want %v", got, want)
		}
	}
	if n := len(CountVector([]int{1}, 5, 2)); n != 0 {
		t.Fatalf("reversed range gave %d bins", n)
	}
}

func TestWriteTrainsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	pred := [][]float64{{0, 1, 0, 0, 1}, {0, 0, 0, 0, 0}}
	rec := [][]float64{{1, 0, 2, 0, 0}, {0, 0, 1, 0, 0}}
	if err := WriteTrains(dir, []int{7, 12}, pred, rec); err != nil {
		t.Fatal(err)
	}
	for i, id := range []int{7, 12} {
		for sub, want := range map[string][]float64{"predicted": pred[i], "recorded": rec[i]} {
			b, err := os.ReadFile(filepath.Join(dir, sub, TrainFileName(id)))
			if err != nil {
				t.Fatal(err)
			}
			a, err := rgc.ReadNPY(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Float64s()
			if err != nil {
				t.Fatal(err)
			}
			if a.Dtype != "i1" || len(got) != len(want) {
				t.Fatalf("%s cell %d: dtype %s len %d", sub, id, a.Dtype, len(got))
			}
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s cell %d: %v, want %v", sub, id, got, want)
				}
			}
		}
	}
	if err := WriteTrains(dir, []int{1}, [][]float64{{0, 1}}, [][]float64{{0}}); err == nil {
		t.Fatal("length mismatch accepted")
	}
	if err := WriteCountsNPY(filepath.Join(dir, "x.npy"), []float64{0.5}); err == nil {
		t.Fatal("fractional count accepted")
	}
}
