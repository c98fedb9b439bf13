//go:build !unix

package graph

// processCPU is unavailable here; benchmarks then omit CPU-time metrics.
func processCPU() float64 { return 0 }
