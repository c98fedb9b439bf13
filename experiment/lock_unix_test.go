//go:build unix

package experiment

import (
	"strings"
	"testing"
)

// TestLock: a second process (here, a second Run) cannot run a locked
// experiment directory.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := lockDir(dir); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("second lock: %v", err)
	}
}
