//go:build linux

package lowprio

import (
	"fmt"
	"syscall"
	"unsafe"
)

// lowerThread sets the calling thread's nice value to Nice and its
// scheduling policy to SCHED_IDLE: the thread runs only on a core that no
// other thread wants, and any thread waking up on its core preempts it at
// once, which nice 19 alone does not guarantee (a nice-19 thread still gets
// its share of a contended core). Lowering either needs no privilege. On
// Linux both apply to one thread, not the process.
func lowerThread() error {
	tid := syscall.Gettid()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, Nice); err != nil {
		return fmt.Errorf("lowprio: setpriority(thread %d, %d): %w", tid, Nice, err)
	}
	var param struct{ priority int32 }
	if _, _, errno := syscall.Syscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), schedIdle, uintptr(unsafe.Pointer(&param))); errno != 0 {
		return fmt.Errorf("lowprio: sched_setscheduler(thread %d, SCHED_IDLE): %w", tid, errno)
	}
	return nil
}

// threadPolicy returns the calling thread's scheduling policy.
func threadPolicy() (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(syscall.Gettid()), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
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
