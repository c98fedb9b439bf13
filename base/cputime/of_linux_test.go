package cputime

import (
	"os"
	"testing"
	"time"
)

// TestOf: another process's CPU time as /proc reads it agrees with this
// process's own measure (Process) to the kernel's 10 ms ticks, and an
// unknown process is an error.
func TestOf(t *testing.T) {
	spin(100 * time.Millisecond)
	before := Process()
	got, err := Of(os.Getpid())
	after := Process()
	if err != nil {
		t.Fatal(err)
	}
	if got < before-3*userHz || got > after+3*userHz {
		t.Errorf("Of(self) %v, want within 30 ms of Process %v..%v", got, before, after)
	}
	if _, err := Of(1 << 30); err == nil {
		t.Error("Of of no process: no error")
	}
}
