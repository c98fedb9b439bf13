package nemesis

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestNewKeys: a run's key file is readable by its owner only, and holds
// the device's two keys and the group's, all different from run to run.
func TestNewKeys(t *testing.T) {
	dir := t.TempDir()
	a, err := NewKeys(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKeys(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(a.File)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 600", st.Mode().Perm(), err)
	}
	ka, kb := a.device(), b.device()
	if ka.Up == nil || ka.Down == nil || a.Parsed.Groups[Group] == nil {
		t.Fatalf("keys %+v, want the device's up and down keys and the group's", a.Parsed)
	}
	if bytes.Equal(ka.Up, kb.Up) || bytes.Equal(ka.Down, kb.Down) || bytes.Equal(a.Parsed.Groups[Group], b.Parsed.Groups[Group]) {
		t.Fatal("two runs drew the same keys")
	}
}
