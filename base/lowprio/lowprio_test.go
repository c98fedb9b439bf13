package lowprio

import (
	"runtime"
	"testing"
)

// TestRun: the work runs once, on a thread at nice Nice and SCHED_IDLE
// (Linux), with one more P than the caller had; afterwards GOMAXPROCS is
// back and the caller's thread kept its priority and policy.
func TestRun(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, beforeErr := threadNice()
	beforePolicy, beforePolicyErr := threadPolicy()

	var ran int
	var during, nice, policy int
	var niceErr, policyErr error
	lowered := Run(func() {
		ran++
		during = runtime.GOMAXPROCS(0)
		nice, niceErr = threadNice()
		policy, policyErr = threadPolicy()
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
	if !lowered || niceErr != nil || nice != Nice || policyErr != nil || policy != schedIdle {
		t.Fatalf("work's thread: lowered %v, nice %d (%v), policy %d (%v), want nice %d, policy %d (SCHED_IDLE)", lowered, nice, niceErr, policy, policyErr, Nice, schedIdle)
	}
	if after, err := threadNice(); beforeErr != nil || err != nil || after != before {
		t.Errorf("caller's thread nice %d -> %d (%v, %v)", before, after, beforeErr, err)
	}
	if after, err := threadPolicy(); beforePolicyErr != nil || err != nil || after != beforePolicy || after == schedIdle {
		t.Errorf("caller's thread policy %d -> %d (%v, %v)", beforePolicy, after, beforePolicyErr, err)
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
