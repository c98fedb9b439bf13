//go:build linux

package rt

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// policies returns the scheduling policy and priority of every thread.
func policies(t *testing.T) map[int][2]uint32 {
	t.Helper()
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][2]uint32{}
	for _, tid := range tids {
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited
		}
		out[tid] = [2]uint32{a.Policy, a.Priority}
	}
	return out
}

// lockedKB returns VmLck of /proc/self/status in kB.
func lockedKB(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmLck:"); ok {
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		}
	}
	t.Fatal("no VmLck in /proc/self/status")
	return ""
}

// newThreadPolicy starts goroutines locked to threads, so that the
// runtime starts new threads, and returns the policy each thread had.
func newThreadPolicies(n int) [][2]uint32 {
	var wg sync.WaitGroup
	out := make([][2]uint32, n)
	release := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if a, err := unix.SchedGetAttr(0, 0); err == nil {
				out[i] = [2]uint32{a.Policy, a.Priority}
			}
			<-release
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	return out
}

// TestApplyUndo: where the process may (CAP_SYS_NICE), Apply puts every
// thread at SCHED_FIFO, threads started afterwards inherit it, memory is
// locked, and Undo puts everything back.
func TestApplyUndo(t *testing.T) {
	st, err := Apply(Settings{Priority: 3})
	if err != nil {
		if st != nil {
			_ = st.Undo()
		}
		if errors.Is(err, unix.EPERM) && strings.Contains(err.Error(), "CAP_SYS_NICE") {
			t.Skipf("this process may not use SCHED_FIFO (the fallback is TestApplyWithoutPrivilege's): %v", err)
		}
		t.Fatalf("Apply: %v", err)
	}
	if st.Priority != 3 || st.Threads < 2 || !st.MemoryLocked || st.CPUs != nil {
		t.Errorf("state %+v, want priority 3 on the process's threads, memory locked, no pinning", st)
	}
	for tid, p := range policies(t) {
		if p != [2]uint32{unix.SCHED_FIFO, 3} {
			t.Errorf("thread %d: policy %d priority %d, want SCHED_FIFO 3", tid, p[0], p[1])
		}
	}
	for i, p := range newThreadPolicies(4) {
		if p != [2]uint32{unix.SCHED_FIFO, 3} {
			t.Errorf("thread started after Apply (%d): policy %d priority %d, want SCHED_FIFO 3", i, p[0], p[1])
		}
	}
	if kb := lockedKB(t); kb == "0" {
		t.Errorf("VmLck 0 kB after Apply")
	}
	if s := st.String(); !strings.Contains(s, "SCHED_FIFO 3 on") || !strings.Contains(s, "memory locked") {
		t.Errorf("String %q", s)
	}
	if err := st.Undo(); err != nil {
		t.Fatalf("Undo: %v", err)
	}
	for tid, p := range policies(t) {
		if p[0] == unix.SCHED_FIFO {
			t.Errorf("thread %d still SCHED_FIFO after Undo", tid)
		}
	}
	if kb := lockedKB(t); kb != "0" {
		t.Errorf("VmLck %s kB after Undo, want 0", kb)
	}
}

// TestApplyPins: Apply pins every thread to the CPUs asked for and Undo
// restores the CPU set; a CPU the process may not use is an error that
// leaves the threads where they were.
func TestApplyPins(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	first := cpuList(&before)[0]
	defer swap(&setAttr, func(int, *unix.SchedAttr) error { return nil })()
	defer swap(&lockAll, func() error { return nil })()
	st, err := Apply(Settings{CPUs: []int{first}})
	if err != nil {
		t.Fatal(err)
	}
	tids, _ := threads()
	for _, tid := range tids {
		var set unix.CPUSet
		if unix.SchedGetaffinity(tid, &set) == nil && (set.Count() != 1 || !set.IsSet(first)) {
			t.Errorf("thread %d on CPUs %v, want [%d]", tid, cpuList(&set), first)
		}
	}
	if err := st.Undo(); err != nil {
		t.Fatal(err)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != before {
		t.Errorf("CPU set after Undo %v (%v), want %v", cpuList(&after), err, cpuList(&before))
	}

	st, err = Apply(Settings{CPUs: []int{maxCPUs - 1}})
	if err == nil || !strings.Contains(err.Error(), "pin to CPUs 1023") || st.CPUs != nil {
		t.Errorf("pinning to CPU %d: state %+v, error %v; want an error and no pinning", maxCPUs-1, st, err)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != before {
		t.Errorf("CPU set after a refused pinning %v, want %v", cpuList(&after), cpuList(&before))
	}
}

// swap replaces *p by v and returns the function that puts it back.
func swap[T any](p *T, v T) func() {
	old := *p
	*p = v
	return func() { *p = old }
}

// TestApplyWithoutPrivilege: where the kernel refuses a part (as it does
// to a process without CAP_SYS_NICE or CAP_IPC_LOCK), Apply does the
// others and its error names what is lacking.
func TestApplyWithoutPrivilege(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fifoErr, mlck error
		want          []string
	}{
		{"no CAP_SYS_NICE", unix.EPERM, nil, []string{"SCHED_FIFO priority 20", "operation not permitted", "CAP_SYS_NICE", "RLIMIT_RTPRIO"}},
		{"no CAP_IPC_LOCK", nil, unix.ENOMEM, []string{"mlockall", "cannot allocate memory", "CAP_IPC_LOCK", "RLIMIT_MEMLOCK"}},
		{"neither", unix.EPERM, unix.EPERM, []string{"CAP_SYS_NICE", "CAP_IPC_LOCK"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			defer swap(&setAttr, func(int, *unix.SchedAttr) error {
				calls++
				return tc.fifoErr
			})()
			defer swap(&lockAll, func() error { return tc.mlck })()
			st, err := Apply(Settings{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if (st.Priority > 0) != (tc.fifoErr == nil) || st.MemoryLocked != (tc.mlck == nil) {
				t.Errorf("state %+v after fifo error %v, mlockall error %v", st, tc.fifoErr, tc.mlck)
			}
			if tc.fifoErr != nil && calls != 1 {
				t.Errorf("%d SCHED_FIFO attempts after a refusal, want 1", calls)
			}
		})
	}
}

// TestProbe: the probe wakes about once per interval, never before its
// deadline, and runs at SCHED_FIFO where the process may.
func TestProbe(t *testing.T) {
	r, err := Probe(context.Background(), time.Millisecond, 50*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Overshoots) != 50 {
		t.Errorf("%d wake-ups in 50 ms at 1 ms, want 50", len(r.Overshoots))
	}
	for i, o := range r.Overshoots {
		if o < 0 {
			t.Errorf("wake-up %d %v before its deadline", i, -o)
		}
	}
	if fifoAllowed() && !r.FIFO {
		t.Error("probe ran at normal priority where SCHED_FIFO is allowed")
	}
	for _, bad := range [][2]time.Duration{{0, time.Second}, {time.Second, time.Millisecond}} {
		if _, err := Probe(context.Background(), bad[0], bad[1], 0); err == nil {
			t.Errorf("probe every %v for %v accepted", bad[0], bad[1])
		}
	}
}

// fifoAllowed reports whether a thread of this process may take
// SCHED_FIFO (tried on a thread that is discarded afterwards).
func fifoAllowed() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // ends locked: the thread is discarded
		ok <- unix.SchedSetAttr(0, fifo(1), 0) == nil
	}()
	return <-ok
}

// TestApplyUnprivileged runs Apply in a child process that lacks
// CAP_SYS_NICE and CAP_IPC_LOCK (setpriv drops them from its bounding
// set) under the limits it is given (RLIMIT_RTPRIO 0, an RLIMIT_MEMLOCK
// smaller than a Go process): the kernel refuses both, the error says
// why, and nothing stays applied.
func TestApplyUnprivileged(t *testing.T) {
	if os.Getenv("RT_UNPRIVILEGED_CHILD") == "1" {
		unprivilegedChild(t)
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed: cannot start a child without the privileges")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: a child without the privileges is what TestApplyUndo already saw")
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-sys_nice,-ipc_lock", os.Args[0], "-test.run=^TestApplyUnprivileged$", "-test.v")
	cmd.Env = append(os.Environ(), "RT_UNPRIVILEGED_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestApplyUnprivileged") {
		t.Fatalf("child did not pass:\n%s", out)
	}
}

// unprivilegedChild is TestApplyUnprivileged's child.
func unprivilegedChild(t *testing.T) {
	for _, l := range []struct {
		r int
		v uint64
	}{{unix.RLIMIT_RTPRIO, 0}, {unix.RLIMIT_MEMLOCK, 1 << 20}} {
		if err := unix.Setrlimit(l.r, &unix.Rlimit{Cur: l.v, Max: l.v}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Apply(Settings{})
	if err == nil {
		t.Fatalf("Apply without privileges: %v, no error", st)
	}
	for _, w := range []string{"SCHED_FIFO priority 20: thread", "operation not permitted", "CAP_SYS_NICE", "RLIMIT_RTPRIO of at least 20 (now 0",
		"mlockall", "CAP_IPC_LOCK", "RLIMIT_MEMLOCK", "(now 1048576 bytes"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if st.Priority != 0 || st.MemoryLocked || st.String() != "nothing" {
		t.Errorf("state %v after refusals, want nothing", st)
	}
	for tid, p := range policies(t) {
		if p[0] == unix.SCHED_FIFO {
			t.Errorf("thread %d SCHED_FIFO", tid)
		}
	}
	t.Log(err)
}
