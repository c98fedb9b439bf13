//go:build !linux

package cputime

// LoadAvg is not measured outside Linux: it returns 0.
func LoadAvg() float64 { return 0 }
