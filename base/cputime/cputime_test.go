package cputime

import (
	"runtime"
	"testing"
	"time"
)

// spin keeps the calling goroutine busy for d of wall time.
func spin(d time.Duration) {
	x := 1.0
	for t0 := time.Now(); time.Since(t0) < d; {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	if x < 0 {
		panic("unreachable")
	}
}

func TestMeter(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("Process is not measured on " + runtime.GOOS)
	}
	cases := []struct {
		name       string
		work       func()
		lo, hi     float64 // bounds on the cores kept busy
		minCPUFrac float64 // CPU time at least this share of one core's wall time
	}{
		// Busy: the process ran at least a share of the wall time (other
		// processes on shared cores may take some), and one goroutine
		// cannot keep much more than one core busy.
		{"busy", func() { spin(200 * time.Millisecond) }, 0.05, 1.5, 0.05},
		// Asleep: next to no CPU time.
		{"asleep", func() { time.Sleep(200 * time.Millisecond) }, 0, 0.2, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := Start()
			c.work()
			wall, cpu := m.Elapsed()
			cores := m.Cores()
			if wall < 200*time.Millisecond {
				t.Fatalf("wall %v, want >= 200ms", wall)
			}
			if cores < c.lo || cores > c.hi {
				t.Fatalf("cores %.3f (cpu %v over wall %v), want in [%g, %g]", cores, cpu, wall, c.lo, c.hi)
			}
			if cpu.Seconds() < c.minCPUFrac*wall.Seconds() {
				t.Fatalf("cpu %v over wall %v, want at least %g of it", cpu, wall, c.minCPUFrac)
			}
		})
	}
}

func TestProcessMonotonic(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("Process is not measured on " + runtime.GOOS)
	}
	a := Process()
	spin(20 * time.Millisecond)
	b := Process()
	if a <= 0 || b < a {
		t.Fatalf("Process %v then %v, want positive and non-decreasing", a, b)
	}
}
