//go:build unix

package model

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSaveMode checks the mode of a saved checkpoint: 0644 less the umask
// (a daemon running as another user must be able to read it), whether the
// target is new or replaces a file of another mode.
func TestSaveMode(t *testing.T) {
	tests := []struct {
		name     string
		umask    int
		existing os.FileMode // mode of a file already at the target; 0 for none
		want     os.FileMode
	}{
		{"umask 022", 0o022, 0, 0o644},
		{"umask 022 over a 0600 file", 0o022, 0o600, 0o644},
		{"umask 002", 0o002, 0, 0o644},
		{"umask 0", 0, 0, 0o644},
		{"umask 077", 0o077, 0, 0o600},
		{"umask 027", 0o027, 0o644, 0o640},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.ckpt")
			if tc.existing != 0 {
				if err := os.WriteFile(path, []byte("old"), tc.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			old := syscall.Umask(tc.umask)
			err := testCheckpoint(t, "gpt-a-cat-cpu", 1).Save(path)
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != tc.want {
				t.Errorf("mode %04o, want %04o", got, tc.want)
			}
		})
	}
}
