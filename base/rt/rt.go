// Package rt puts a process in real-time mode on Linux: every thread at a
// SCHED_FIFO priority, its memory locked, optionally pinned to some CPUs;
// and measures the host's own wake-up floor (Probe).
//
// Go runs goroutines on whichever thread holds a scheduler slot, and the
// NATS client reads its socket on a goroutine of its own, so the frames'
// path is every thread of the process, not a few locked ones: Apply raises
// each of them, and the threads the runtime starts later inherit the policy
// and the CPU set of the thread that starts them.
//
//   - SCHED_FIFO: a woken thread preempts every normal (SCHED_OTHER) thread
//     at once instead of waiting for its share of a busy core.
//   - mlockall: no page fault on the frames' path (a page fault costs
//     microseconds, a page read back from disk milliseconds).
//   - CPU pinning: the process stays on CPUs an operator keeps for it
//     (isolcpus), with warm caches.
//
// Each part fails on its own, with an error that names the privilege it
// lacks (CAP_SYS_NICE or RLIMIT_RTPRIO, CAP_IPC_LOCK or RLIMIT_MEMLOCK);
// the parts that worked stay applied.
package rt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultPriority is the SCHED_FIFO priority of the mode: above every
// normal thread, below the kernel's interrupt threads (50 on PREEMPT_RT
// kernels), which the frames' packets need.
const DefaultPriority = 20

// Settings are what the real-time mode asks of the OS.
type Settings struct {
	// Priority is the SCHED_FIFO priority of every thread, 1 to 99 (0:
	// DefaultPriority).
	Priority int
	// CPUs pins every thread to these CPUs (empty: no pinning).
	CPUs []int
}

// Check reports settings the OS would refuse whatever the privileges.
func (s Settings) Check() error {
	if s.Priority < 0 || s.Priority > 99 {
		return fmt.Errorf("rt: priority %d: want 1 to 99 (0: %d)", s.Priority, DefaultPriority)
	}
	for _, c := range s.CPUs {
		if c < 0 || c >= maxCPUs {
			return fmt.Errorf("rt: CPU %d: want 0 to %d", c, maxCPUs-1)
		}
	}
	return nil
}

// priority returns the priority applied.
func (s Settings) priority() int {
	if s.Priority == 0 {
		return DefaultPriority
	}
	return s.Priority
}

// maxCPUs bounds the CPU numbers a pinning may name (unix.CPUSet's size).
const maxCPUs = 1024

// State is what Apply did to the process; Undo reverts it.
type State struct {
	// Priority is the SCHED_FIFO priority every thread got (0: none).
	Priority int
	// Threads is the number of threads raised.
	Threads int
	// MemoryLocked reports whether mlockall succeeded.
	MemoryLocked bool
	// CPUs are the CPUs the threads are pinned to (nil: not pinned).
	CPUs []int

	prev saved // the process's policy and CPU set before Apply
}

// String says what the mode applied, in a log's words.
func (st *State) String() string {
	var parts []string
	if st.Priority > 0 {
		parts = append(parts, fmt.Sprintf("SCHED_FIFO %d on %d threads", st.Priority, st.Threads))
	}
	if st.MemoryLocked {
		parts = append(parts, "memory locked")
	}
	if st.CPUs != nil {
		parts = append(parts, "pinned to CPUs "+FormatCPUs(st.CPUs))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// FormatCPUs writes CPU numbers as a comma-separated list.
func FormatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// ErrUnsupported is returned where the OS has none of the mode's controls.
var ErrUnsupported = errors.New("rt: real-time mode needs Linux")
