package lowprio

import (
	"runtime"
	"testing"
)

// TestRun: the work runs once, on a thread at nice Nice (Linux), with one
// more P than the caller had; afterwards GOMAXPROCS is back and the
// caller's thread kept its priority.
func TestRun(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, beforeErr := threadNice()

	var ran int
	var during, nice int
	var niceErr error
	lowered := Run(func() {
		ran++
		during = runtime.GOMAXPROCS(0)
		nice, niceErr = threadNice()
	})
	if ran != 1 {
		t.Fatalf("work ran %d times", ran)
	}
	if during != procs+1 {
		t.Errorf("GOMAXPROCS %d during the work, want %d", during, procs+1)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after the work, want %d", got, procs)
	}
	if runtime.GOOS != "linux" {
		if lowered {
			t.Errorf("priority reported lowered on %s", runtime.GOOS)
		}
		return
	}
	if !lowered || niceErr != nil || nice != Nice {
		t.Fatalf("work's thread: lowered %v, nice %d (%v), want nice %d", lowered, nice, niceErr, Nice)
	}
	if after, err := threadNice(); beforeErr != nil || err != nil || after != before {
		t.Errorf("caller's thread nice %d -> %d (%v, %v)", before, after, beforeErr, err)
	}
}

// TestRunConcurrent: concurrent Runs each complete and leave GOMAXPROCS
// as it was.
func TestRunConcurrent(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() { Run(func() {}); done <- struct{}{} }()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after concurrent runs, want %d", got, procs)
	}
}
