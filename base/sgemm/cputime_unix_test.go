//go:build unix

package sgemm

import "syscall"

// processCPU returns the process's user+system CPU time in seconds, so
// benchmarks can report CPU time per window, which stays meaningful when
// other processes share the cores.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
