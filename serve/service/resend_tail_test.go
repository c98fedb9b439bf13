package service

import (
	"context"
	"testing"
	"time"

	"rgcpred/serve/daemon"
)

// TestServiceResendTail: the daemon misses a stream's last 50 frames (its
// subscription gone until the device stopped sending) and no later frame
// shows it the gap. After daemon.TailAfter of silence it asks the device
// for the frames after its last one; a device serving resend requests
// sends them and the decisions are the offline rollout's, with no bin
// filled, also with message keys. With a device that does not serve
// them the daemon asks once and stays at its last frame.
func TestServiceResendTail(t *testing.T) {
	f := getFixture(t)
	tailAt := f.lo + 10*((f.hi-f.lo-50)/10) // the first frame missed
	for _, tc := range []struct {
		name        string
		keys, serve bool
	}{
		{"resent", false, true},
		{"resent with keys", true, true},
		{"no responders", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, reg, p, c := startResendRig(t, f, tc.keys, tc.serve)
			var restore func()
			publishSplit(t, f, p, 10, func(i int) {
				if f.lo+10*i == tailAt {
					waitProcessed(t, p, int64(tailAt-1))
					restore = dropStim(t, s)
				}
			})
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			restore()
			if !tc.serve {
				time.Sleep(4 * daemon.TailAfter)
				st, err := p.Status(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got := counter(t, reg, "predictord_resend_requests_total", "dev0", "tail"); got != 1 || st.LastSeq != int64(tailAt-1) {
					t.Fatalf("without a responder: %v tail requests, last frame %d; want 1 and %d", got, st.LastSeq, tailAt-1)
				}
				return
			}
			waitProcessed(t, p, int64(f.hi-1))
			sameSpikes(t, waitSpikes(t, c, f.hi, f.nSpike), f.want)
			if got := counter(t, reg, "predictord_resend_requests_total", "dev0", "tail"); got < 1 {
				t.Errorf("%v tail requests, want at least 1", got)
			}
			if got := counter(t, reg, "predictord_resend_recovered_bins_total", "dev0"); got < float64(f.hi-tailAt) {
				t.Errorf("%v bins recovered, want at least %d", got, f.hi-tailAt)
			}
			if got := counter(t, reg, "predictord_gap_bins_total", "dev0"); got != 0 {
				t.Errorf("%v gap bins filled, want 0", got)
			}
		})
	}
}
