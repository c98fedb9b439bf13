//go:build linux

package cputime

import (
	"os"
	"strconv"
	"strings"
)

// LoadAvg returns the 1-minute load average, the number of runnable
// threads on the machine (0 if unknown): with more than the cores, rates
// per wall-second are diluted by other work.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
