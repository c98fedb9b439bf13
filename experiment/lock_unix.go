//go:build unix

package experiment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on the experiment directory dir, so that
// two processes never run one experiment at once; the returned function
// releases it. The lock is the kernel's (flock), so a killed process never
// leaves it held.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock experiment: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("experiment %s is being run by another process", dir)
		}
		return nil, fmt.Errorf("lock experiment %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
