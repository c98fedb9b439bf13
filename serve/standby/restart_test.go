package standby

import (
	"testing"
	"time"

	"rgcpred/serve/embednats/embedtest"
)

// TestGroupOwnRestart: a standby that missed frames (a cut link) and so
// restarted the stream where the holder did not raises the divergence
// alarm, may not take the lease meanwhile, and catches up with the
// holder's state; a restart every replica sees (the device's own) raises
// nothing.
func TestGroupOwnRestart(t *testing.T) {
	t.Parallel() // waits for most of its time; independent of the other tests
	for _, c := range []struct {
		name string
		// after feeds the holder a and the standby b after both saw frames
		// 0..4199 and returns the next frame.
		after func(t *testing.T, a, b *groupDev) int64
		alarm bool
	}{
		{"standby missed frames", func(t *testing.T, a, b *groupDev) int64 {
			for lo := int64(4200); lo < 6200; lo += 100 {
				a.feed(t, lo, 100, 0.5)
				if lo < 4300 || lo >= 6000 { // b's link was cut for 1700 frames
					b.feed(t, lo, 100, 0.5)
				}
			}
			return 6200
		}, true},
		{"the device restarted", func(t *testing.T, a, b *groupDev) int64 {
			for lo := int64(100000); lo < 100300; lo += 100 {
				a.feed(t, lo, 100, 0.5)
				b.feed(t, lo, 100, 0.5)
			}
			return 100300
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own server and group, and mostly waits
			a, b := syncedPair(t)
			embedtest.Wait(t, "b compared the first stream event", func() bool { return b.r.Checked() >= 1 })
			next := c.after(t, a, b)
			if c.alarm {
				if b.g.synced() {
					t.Error("b may take the lease with a restart the holder did not announce")
				}
				embedtest.Wait(t, "the divergence alarm", func() bool { return b.g.Alarms()[AlarmDivergence] >= 1 })
				embedtest.Wait(t, "b caught up again", func() bool { return b.r.Synced() && b.r.Restores() == 2 })
			} else {
				time.Sleep(RestartWait + 200*time.Millisecond)
				if n := b.g.Alarms()[AlarmDivergence]; n != 0 {
					t.Fatalf("%d divergence alarms for a restart both replicas saw", n)
				}
				if !b.g.synced() {
					t.Fatal("b not eligible after the holder announced the same restart")
				}
			}
			embedtest.Wait(t, "b eligible", b.g.synced)
			for lo := next; lo < next+200; lo += 100 {
				a.feed(t, lo, 100, 0.5)
				b.feed(t, lo, 100, 0.5)
			}
			if a.state(t) != b.state(t) {
				t.Fatal("b's state differs from the holder's")
			}
		})
	}
}
