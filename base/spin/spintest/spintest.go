// Package spintest helps test thread teams: a watchdog that turns a hang
// into a failure with every goroutine's stack, and a count of a team's
// live threads.
package spintest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Watchdog ends the test binary with every goroutine's stack when the
// returned stop has not been called within d: a deadlocked team fails
// with the evidence instead of running into go test's timeout. Use it as
// defer Watchdog(t, d)().
func Watchdog(t testing.TB, d time.Duration) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(d):
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			// t.Fatal may not be called off the test goroutine, and the
			// test goroutine is the one that hangs: panic ends the binary
			// with the dump.
			panic(fmt.Sprintf("%s: no progress after %v (hang):\n%s", t.Name(), d, buf))
		}
	}()
	return func() { close(done) }
}

// Running counts the goroutines whose stacks hold call, a function as a
// stack trace names it with its opening parenthesis (for example
// "graph.(*team).helper("): the threads of a team alive at the moment.
func Running(call string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), call)
		}
		buf = make([]byte, 2*len(buf))
	}
}
