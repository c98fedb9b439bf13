package service

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rgcpred/rgc"
	"rgcpred/serve/embednats"
	"rgcpred/serve/embednats/embedtest"
	"rgcpred/stream"
)

// soakEnv names the duration of the hot-standby soak (e.g. 30m); unset,
// the soak is skipped. soakReportEnv names a file for its report.
const (
	soakEnv       = "RGCPRED_SOAK"
	soakReportEnv = "RGCPRED_SOAK_REPORT"
)

// soakSample is one interval of the soak.
type soakSample struct {
	at         time.Duration
	heapMiB    float64
	goroutines int
	decisions  int
	p50, p99   time.Duration
	worst      time.Duration
}

// TestSoakStandby streams frames at real time (one per bin) to two
// instances of a standby group serving 60 cells for $RGCPRED_SOAK and
// reports, per interval, the process's heap, goroutines and the decisions'
// latency (receipt minus the frame's send time): all three should stay
// flat. It fails if the heap or the goroutines grow over the run (the last
// third's against the first third's, with slack for the collector's
// timing); latency is reported, not asserted.
func TestSoakStandby(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv(soakEnv))
	if err != nil || dur <= 0 {
		t.Skipf("set %s to a duration (e.g. 30m) to run the soak", soakEnv)
	}
	srv := embedtest.JetStreamServer(t, embednats.Options{})
	ids := make([]int, 60)
	for i := range ids {
		ids[i] = i
	}
	cfg := Config{Load: fakeLoader(ids), PublishSilence: true, Stagger: true, MaxLag: 40}
	a := startReplica(t, srv.ClientURL(), cfg, "a")
	checkFor(t, waitLimit, func() error { st, _ := a.s.StandbyStatus(); return awaited("a holds the lease", st.Held) })
	b := startReplica(t, srv.ClientURL(), cfg, "b")
	checkFor(t, waitLimit, func() error { return awaited("b synced", b.s.devices[0].sb.Synced()) })

	p := newPublisher(t, &env{srv: srv, url: srv.ClientURL()}, "dev0")
	var mu sync.Mutex
	var lat []time.Duration
	sub, err := p.SubscribeDecisions(func(ds *stream.Decisions, err error) {
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		mu.Lock()
		for _, d := range ds.Decisions {
			lat = append(lat, time.Duration(now-d.FrameTime))
		}
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	interval := max(dur/30, 10*time.Second)
	binMs := rgc.BinMs
	bin := time.Duration(binMs * float64(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	tick := time.NewTicker(bin)
	defer tick.Stop()
	sample := time.NewTicker(interval)
	defer sample.Stop()
	start := time.Now()
	var samples []soakSample
	f := &stream.Frames{Frames: make([]stream.Frame, 1)}
	for seq := int64(0); ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-sample.C:
			samples = append(samples, takeSample(time.Since(start), &mu, &lat))
		case <-tick.C:
			// Frames due since the last tick go in one message, so a late
			// tick does not slow the stream down.
			due := int64(time.Since(start)/bin) + 1
			n := min(due-seq, stream.MaxFramesPerMsg)
			if n <= 0 {
				continue
			}
			f.FirstSeq, f.Frames = seq, f.Frames[:0]
			now := time.Now().UnixNano()
			for k := range n {
				s := seq + k
				var fr stream.Frame
				fr.Time = now
				for c := range fr.LED {
					fr.LED[c] = float32((s*int64(c+3))%11) / 11
				}
				f.Frames = append(f.Frames, fr)
			}
			if err := p.PublishFrames(f); err != nil {
				t.Fatal(err)
			}
			seq += n
		}
	}
	report := formatSoak(dur, samples)
	t.Log("\n" + report)
	if path := os.Getenv(soakReportEnv); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(samples) < 6 {
		t.Fatalf("%d samples: the soak ran too briefly to judge", len(samples))
	}
	third := len(samples) / 3
	early, late := samples[1:third+1], samples[len(samples)-third:]
	maxOf := func(ss []soakSample, f func(soakSample) float64) float64 {
		m := 0.0
		for _, s := range ss {
			m = max(m, f(s))
		}
		return m
	}
	heap := func(s soakSample) float64 { return s.heapMiB }
	gor := func(s soakSample) float64 { return float64(s.goroutines) }
	if e, l := maxOf(early, heap), maxOf(late, heap); l > 1.5*e+16 {
		t.Errorf("heap grew from at most %.1f MiB to %.1f MiB", e, l)
	}
	if e, l := maxOf(early, gor), maxOf(late, gor); l > e+10 {
		t.Errorf("goroutines grew from at most %.0f to %.0f", e, l)
	}
	if st, _ := a.s.StandbyStatus(); !st.Held {
		t.Errorf("a lost the lease during the soak: %+v", st)
	}
}

// takeSample measures the process and the latencies received since the
// previous sample.
func takeSample(at time.Duration, mu *sync.Mutex, lat *[]time.Duration) soakSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mu.Lock()
	l := slices.Clone(*lat)
	*lat = (*lat)[:0]
	mu.Unlock()
	s := soakSample{at: at, heapMiB: float64(ms.HeapInuse) / (1 << 20), goroutines: runtime.NumGoroutine(), decisions: len(l)}
	if len(l) > 0 {
		slices.Sort(l)
		s.p50, s.p99, s.worst = l[len(l)/2], l[len(l)*99/100], l[len(l)-1]
	}
	return s
}

func formatSoak(dur time.Duration, samples []soakSample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hot-standby soak: 2 instances, 60 cells, real time, %v\n", dur)
	fmt.Fprintf(&b, "%10s %10s %10s %10s %10s %10s %10s\n", "time", "heap MiB", "goroutines", "decisions", "p50", "p99", "worst")
	for _, s := range samples {
		fmt.Fprintf(&b, "%10s %10.1f %10d %10d %10s %10s %10s\n", s.at.Round(time.Second), s.heapMiB, s.goroutines, s.decisions,
			s.p50.Round(10*time.Microsecond), s.p99.Round(10*time.Microsecond), s.worst.Round(10*time.Microsecond))
	}
	return b.String()
}
