package model

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSaveSteps records the durability steps of Save and injects a failure
// at each: a successful save syncs the file, renames it over the target and
// then syncs the directory; a failure before the rename leaves the old
// target untouched, and no failure leaves a temporary file behind.
func TestSaveSteps(t *testing.T) {
	boom := errors.New("injected")
	tests := []struct {
		name      string
		failAt    string // step that fails; "" for none
		wantSteps []string
		wantErr   string // "" for success
		replaced  bool   // the target holds the new checkpoint afterwards
	}{
		{"ok", "", []string{"sync file", "rename", "sync dir"}, "", true},
		{"file sync fails", "sync file", []string{"sync file"}, "sync: injected", false},
		{"rename fails", "rename", []string{"sync file", "rename"}, "injected", false},
		{"dir sync fails", "sync dir", []string{"sync file", "rename", "sync dir"}, "sync directory", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "m.ckpt")
			old := testCheckpoint(t, "gpt-a-cat-cpu", 1)
			if err := old.Save(path); err != nil {
				t.Fatal(err)
			}
			c := testCheckpoint(t, "gpt-a-cat-cpu", 1)
			c.Provenance.Steps = 99
			var got []string
			step := func(name string, f func() error) error {
				got = append(got, name)
				if name == tc.failAt {
					return boom
				}
				return f()
			}
			steps := saveSteps{
				syncFile: func(f *os.File) error { return step("sync file", f.Sync) },
				rename: func(a, b string) error {
					return step("rename", func() error { return os.Rename(a, b) })
				},
				syncDir: func(d string) error {
					if filepath.Clean(d) != dir {
						t.Errorf("synced directory %s, want %s", d, dir)
					}
					return step("sync dir", func() error { return syncDir(d) })
				},
			}
			err := c.save(path, steps)
			if !slices.Equal(got, tc.wantSteps) {
				t.Errorf("steps %v, want %v", got, tc.wantSteps)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			back, err := LoadCheckpoint(path)
			if err != nil {
				t.Fatal(err)
			}
			if wantSteps := map[bool]int{true: 99, false: 1234}[tc.replaced]; back.Provenance.Steps != wantSteps {
				t.Errorf("target holds the checkpoint of step %d, want %d", back.Provenance.Steps, wantSteps)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only m.ckpt", len(entries))
			}
		})
	}
}
