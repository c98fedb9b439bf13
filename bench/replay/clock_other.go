//go:build !linux

package replay

import (
	"runtime"
	"time"
)

// PrepareThread locks the calling goroutine to its OS thread; elsewhere than
// Linux there is no timer-slack control, so SystemClock sleeps with the
// runtime timer.
func PrepareThread() (undo func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// preciseSleep sleeps with the runtime timer.
func preciseSleep(d time.Duration) { time.Sleep(d) }
