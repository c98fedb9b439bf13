//go:build !linux

package cputime

import (
	"errors"
	"time"
)

// LoadAvg is not measured outside Linux: it returns 0.
func LoadAvg() float64 { return 0 }

// Of is not measured outside Linux: it returns an error.
func Of(pid int) (time.Duration, error) {
	return 0, errors.New("cputime: another process's CPU time is read on Linux only")
}
