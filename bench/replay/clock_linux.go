//go:build linux

package replay

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK option.
const prSetTimerSlack = 29

// PrepareThread locks the calling goroutine to its OS thread and sets that
// thread's timer slack to 1 µs, so that SystemClock's sleeps wake within
// tens of microseconds of their deadline instead of the default 50 µs slack
// plus the runtime timer's millisecond granularity. Call it at the start of
// the goroutine that paces frames; the returned function undoes the lock.
func PrepareThread() (undo func()) {
	runtime.LockOSThread()
	// Best effort: an error leaves the default 50 µs slack, still far better
	// than the runtime timer.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1000, 0)
	return runtime.UnlockOSThread
}

// preciseSleep blocks the OS thread in nanosleep(2) for d.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	// EINTR (a signal) only shortens the sleep; SleepUntil loops.
	_ = syscall.Nanosleep(&ts, nil)
}
