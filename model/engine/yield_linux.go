package engine

import "syscall"

// yieldThread lets other goroutines run on this thread's P, then other
// runnable threads run on its core (sched_yield), and returns at once when
// none is waiting: a polling helper stays on its core without taking it
// from the daemon's transport.
func yieldThread() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
