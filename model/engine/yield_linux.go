package engine

import "syscall"

// yieldThread lets other runnable threads run on this thread's core
// (sched_yield) and returns at once when none is waiting: a polling helper
// stays on its core without taking it from the daemon's transport. It
// keeps the thread's P (team.next also yields that where Ps are scarce).
func yieldThread() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
