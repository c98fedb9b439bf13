//go:build linux

package service

import (
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"rgcpred/base/rt"
)

// fifoThreads counts the process's threads at SCHED_FIFO.
func fifoThreads(t *testing.T) (fifo, all int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if a, err := unix.SchedGetAttr(tid, 0); err == nil {
			all++
			if a.Policy == unix.SCHED_FIFO {
				fifo++
			}
		}
	}
	return fifo, all
}

// decisionKey is a decision without its timing.
type decisionKey struct {
	cell      int32
	end, bin  int64
	kind      uint8
	frameTime int64
}

// TestRealTimeSameDecisions: the service in real-time mode takes exactly
// the decisions it takes without it (spikes and silences), frames arriving
// one per message with pauses, so that the processor polls for due frames;
// while it serves, every thread is at SCHED_FIFO where the process may
// (otherwise the mode falls back and serves all the same), and none is
// once it has stopped.
func TestRealTimeSameDecisions(t *testing.T) {
	f := getFixtureStagger(t, true)
	e := startNATS(t)
	st, err := rt.Apply(rt.Settings{Priority: 1})
	fifoAllowed := st.Priority > 0
	if err := st.Undo(); err != nil {
		t.Fatal(err)
	}
	t.Logf("real-time mode on this host: %v", err)
	run := func(mode *rt.Settings) map[decisionKey]int {
		_, stop := startService(t, e, Config{Load: fakeLoader(f.ids), MaxBatch: 3, PublishSilence: true, Stagger: true, RealTime: mode})
		defer stop()
		if fifo, all := fifoThreads(t); mode != nil && fifoAllowed && fifo != all {
			t.Errorf("real-time mode: %d of %d threads at SCHED_FIFO", fifo, all)
		} else if mode == nil && fifo != 0 {
			t.Errorf("mode off: %d threads at SCHED_FIFO", fifo)
		}
		p := newPublisher(t, e, "dev0")
		col := collectAll(t, p)
		publishSplit(t, f, p, 1, func(i int) {
			if i%200 == 0 {
				time.Sleep(2 * time.Millisecond) // the queue empties: the processor waits
			}
		})
		got := waitSpikes(t, col, f.hi, f.nSpike)
		sameSpikes(t, got, f.want)
		out := map[decisionKey]int{}
		for _, d := range col.Decisions() {
			out[decisionKey{d.Cell, d.End, d.Bin, d.Kind, d.FrameTime}]++
		}
		if err := col.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	off := run(nil)
	on := run(&rt.Settings{Priority: 2})
	if fifo, _ := fifoThreads(t); fifo != 0 {
		t.Errorf("%d threads still at SCHED_FIFO after the service stopped", fifo)
	}
	if len(on) != len(off) {
		t.Fatalf("%d distinct decisions in real-time mode, %d without", len(on), len(off))
	}
	for k, n := range off {
		if on[k] != n {
			t.Fatalf("decision %+v: %d times in real-time mode, %d without", k, on[k], n)
		}
	}
	t.Logf("%d decisions alike with and without the mode (SCHED_FIFO allowed: %v)", len(off), fifoAllowed)
}
