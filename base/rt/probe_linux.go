//go:build linux

package rt

import (
	"context"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Probe measures the host's wake-up floor as cyclictest does: a thread of
// its own, at SCHED_FIFO priority where allowed (0: DefaultPriority),
// sleeps to absolute deadlines interval apart for d (or until ctx ends)
// and records by how much each wake-up overshot its deadline. The thread
// sleeps and reads the clock with raw system calls, so the Go scheduler
// adds nothing to what it measures; it holds one of the scheduler's slots
// (a P) meanwhile, and is discarded afterwards.
func Probe(ctx context.Context, interval, d time.Duration, priority int) (ProbeResult, error) {
	if err := (Settings{Priority: priority}).Check(); err != nil {
		return ProbeResult{}, err
	}
	if interval <= 0 || d < interval {
		return ProbeResult{}, errProbeSpan(interval, d)
	}
	p := Settings{Priority: priority}.priority()
	out := make(chan ProbeResult, 1)
	go func() {
		// The goroutine ends locked, so the runtime discards the thread
		// instead of reusing it at its priority.
		runtime.LockOSThread()
		r := ProbeResult{FIFO: setAttr(0, fifo(p)) == nil}
		n := int(d / interval)
		r.Overshoots = make([]time.Duration, 0, n)
		next := monotonic()
		for i := 0; i < n && ctx.Err() == nil; i++ {
			next += interval.Nanoseconds()
			ts := unix.NsecToTimespec(next)
			for {
				_, _, errno := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME,
					uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
				if errno != unix.EINTR {
					break
				}
			}
			r.Overshoots = append(r.Overshoots, time.Duration(monotonic()-next))
		}
		out <- r
	}()
	return <-out, nil
}

// monotonic reads CLOCK_MONOTONIC in nanoseconds with a raw system call.
func monotonic() int64 {
	var ts unix.Timespec
	unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0)
	return unix.TimespecToNsec(ts)
}
