package service

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServiceResendLongGap: the daemon's frames subscription is gone for
// about 2 s while the device sends 2000 frames (longer than a window, as
// when the daemon's NATS node is cut off). The silence makes the daemon
// ask for the frames after its last one (a tail: the first 1024, and, the
// answer full, at once the next 1024, which hold the rest), so the frame
// after the gap shows no gap. Its decisions are the offline rollout's:
// the same stream, no restart, no bin filled.
func TestServiceResendLongGap(t *testing.T) {
	const gap = 2000
	f := getFixture(t)
	if f.hi-f.lo < 1500+gap+1000 {
		t.Fatalf("the fixture's %d frames are too few for the gap", f.hi-f.lo)
	}
	s, reg, p, c := startResendRig(t, f, false, true)
	gapAt := f.lo + 1500
	var restore func()
	publishSplit(t, f, p, 10, func(i int) {
		switch f.lo + 10*i {
		case gapAt:
			waitProcessed(t, p, int64(gapAt-1))
			restore = dropStim(t, s)
		case gapAt + gap:
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(gap*BinPeriod + 100*time.Millisecond) // the wall time a paced device's gap takes
			restore()
		case gapAt + gap + 10:
			waitRecovered(t, reg, gap)
		}
	})
	sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
	for _, m := range []struct {
		name  string
		label []string
		want  float64
	}{
		{"predictord_resend_requests_total", []string{"dev0", "tail"}, 2},
		{"predictord_resend_requests_total", []string{"dev0", "answered"}, 0},
		{"predictord_resend_requests_total", []string{"dev0", "partial"}, 0},
		{"predictord_resend_requests_total", []string{"dev0", "none"}, 0},
		{"predictord_resend_requests_total", []string{"dev0", "timeout"}, 0},
		{"predictord_resend_recovered_bins_total", []string{"dev0"}, gap},
		{"predictord_gap_bins_total", []string{"dev0"}, 0},
		{"predictord_stream_restarts_total", []string{"dev0"}, 0},
		{"predictord_filled_decisions_total", []string{"dev0"}, 0},
	} {
		if got := counter(t, reg, m.name, m.label...); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.label, got, m.want)
		}
	}
	if st := p.ResendServed(); st.Answered != 2 || st.Frames != gap {
		t.Errorf("device served %+v, want two tail requests and %d frames in all", st, gap)
	}
	if got := counter(t, reg, "predictord_frames_rejected_total", "dev0", "out_of_stream"); got != 0 {
		t.Errorf("%v frames refused as out of stream", got)
	}
}

// waitRecovered waits until n bins were recovered with resent frames.
func waitRecovered(t *testing.T, reg *prometheus.Registry, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, reg, "predictord_resend_recovered_bins_total", "dev0") < n {
		if time.Now().After(deadline) {
			t.Fatalf("%v bins recovered after 10 s, want %v", counter(t, reg, "predictord_resend_recovered_bins_total", "dev0"), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
