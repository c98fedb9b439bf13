//go:build unix

package graph

import "syscall"

// processCPU returns the process's user+system CPU time in seconds: with
// other processes on the cores, samples per CPU-second stays meaningful
// where samples per wall-second does not.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
