// Package cputime measures the CPU time a process uses, so that rates can
// be quoted per CPU-second beside per wall-second: on shared cores the wall
// clock moves with other processes' load, the CPU time much less. The
// ratio of the two over an interval is how many cores the process kept
// busy.
package cputime

import "time"

// Meter measures an interval from its Start: wall time, CPU time and the
// cores kept busy.
type Meter struct {
	wall0 time.Time
	cpu0  time.Duration
}

// Start begins an interval now.
func Start() Meter { return Meter{wall0: time.Now(), cpu0: Process()} }

// Elapsed returns the wall and CPU time since Start (CPU 0 where Process
// is not measured).
func (m Meter) Elapsed() (wall, cpu time.Duration) {
	cpu = Process()
	if cpu > 0 {
		cpu -= m.cpu0
	}
	return time.Since(m.wall0), cpu
}

// Cores returns the CPU time per wall time since Start: 2 when the process
// kept two cores busy throughout; 0 where Process is not measured.
func (m Meter) Cores() float64 {
	wall, cpu := m.Elapsed()
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}
