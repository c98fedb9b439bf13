//go:build linux

package cputime

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

// Of returns the CPU time (user and system) process pid has used, read
// from /proc/PID/stat, in the kernel's clock ticks of 10 ms.
func Of(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * userHz, nil
}

// userHz is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const userHz = 10 * time.Millisecond
