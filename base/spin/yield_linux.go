package spin

import "syscall"

// Yield lets other runnable threads run on this thread's core
// (sched_yield) and returns at once when none is waiting: a polling thread
// stays on its core without taking it from the threads it waits for. It
// keeps the thread's P. Under SCHED_FIFO it yields only to threads of the
// same priority.
func Yield() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
