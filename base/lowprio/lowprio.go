// Package lowprio runs background work (a model reload: reading a
// checkpoint, packing its weights, probing it) without taking cores from
// the real-time work beside it.
//
// Run gives the Go scheduler one more P for the duration of the work and
// runs the work on an OS thread of its own at the lowest CPU priority
// (on Linux nice 19 and the SCHED_IDLE policy). The live goroutines keep
// every P they had, and where the work's thread and a live thread compete
// for a core, the kernel's scheduler runs the live one: the work's thread
// runs only on a core nothing else wants, and is preempted as soon as a
// live thread wakes up there. The thread is discarded afterwards, so its
// priority never reaches other goroutines. Where per-thread priorities are
// unavailable the work runs at normal priority, still with its own P.
//
// Goroutines the work starts (an engine's helper threads) inherit neither
// the thread nor its priority: keep such work short.
package lowprio

import (
	"runtime"
	"sync"
)

// Nice is the priority the work's thread runs at on Linux.
const Nice = 19

// schedIdle is the number of Linux's SCHED_IDLE scheduling policy, the
// work thread's policy there.
const schedIdle = 5

// mu serialises the GOMAXPROCS changes of concurrent Runs.
var mu sync.Mutex

// Run runs fn to completion on a low-priority thread of its own and
// returns once fn has returned. It reports whether the priority could be
// lowered (false: fn ran at normal priority).
func Run(fn func()) (lowered bool) {
	mu.Lock()
	defer mu.Unlock()
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + 1)
	defer runtime.GOMAXPROCS(procs)

	done := make(chan bool)
	go func() {
		// The goroutine ends locked to its thread, so the runtime
		// terminates the thread instead of reusing it at low priority.
		runtime.LockOSThread()
		ok := lowerThread() == nil
		fn()
		done <- ok
	}()
	return <-done
}
