//go:build linux

package lowprio

import (
	"fmt"
	"syscall"
)

// lowerThread sets the calling thread's nice value to Nice. On Linux,
// setpriority(PRIO_PROCESS, tid) applies to one thread, not the process.
func lowerThread() error {
	tid := syscall.Gettid()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, Nice); err != nil {
		return fmt.Errorf("lowprio: setpriority(thread %d, %d): %w", tid, Nice, err)
	}
	return nil
}

// threadNice returns the calling thread's nice value.
func threadNice() (int, error) {
	// The raw getpriority system call returns 20 - nice.
	r, _, errno := syscall.Syscall(syscall.SYS_GETPRIORITY, syscall.PRIO_PROCESS, uintptr(syscall.Gettid()), 0)
	if errno != 0 {
		return 0, errno
	}
	return 20 - int(r), nil
}
