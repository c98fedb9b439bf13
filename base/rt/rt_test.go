package rt

import "testing"

// TestCheck: settings no OS accepts are refused before any system call.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		s  Settings
		ok bool
	}{
		{Settings{}, true},
		{Settings{Priority: 99, CPUs: []int{0, 1}}, true},
		{Settings{Priority: -1}, false},
		{Settings{Priority: 100}, false},
		{Settings{CPUs: []int{-1}}, false},
		{Settings{CPUs: []int{maxCPUs}}, false},
	} {
		if err := tc.s.Check(); (err == nil) != tc.ok {
			t.Errorf("Check(%+v) = %v, want ok %v", tc.s, err, tc.ok)
		}
		if tc.ok {
			continue
		}
		if st, err := Apply(tc.s); err == nil || st == nil || st.String() != "nothing" {
			t.Errorf("Apply(%+v) = %v, %v; want nothing applied and the error", tc.s, st, err)
		}
	}
}

// TestString: the log line names what was applied.
func TestString(t *testing.T) {
	for _, tc := range []struct {
		st   State
		want string
	}{
		{State{}, "nothing"},
		{State{Priority: 20, Threads: 7, MemoryLocked: true, CPUs: []int{0, 1}}, "SCHED_FIFO 20 on 7 threads, memory locked, pinned to CPUs 0,1"},
		{State{MemoryLocked: true}, "memory locked"},
	} {
		if got := tc.st.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
}
