//go:build !linux

package bench

import "time"

// processCPU is not measured outside Linux (reported as 0).
func processCPU() time.Duration { return 0 }

// loadAvg is not measured outside Linux.
func loadAvg() float64 { return 0 }
