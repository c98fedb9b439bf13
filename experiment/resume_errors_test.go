package experiment

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeRefusesDamagedState interrupts the tiny experiment after the
// second run's boundary at step 4, damages one file of its state, and
// resumes: the experiment refuses with an error naming the file and keeps
// the boundary's files as it found them (a missing manifest does not start
// a fresh experiment over the runs, a missing best checkpoint is not read
// as "no best model yet" when the boundary's resume state records one);
// with the file repaired, it resumes to the end.
func TestResumeRefusesDamagedState(t *testing.T) {
	data := synthData(t)
	second := runName("gpt-a-logmix-cpu", 1)
	base := filepath.Join(t.TempDir(), "exp")
	o := tinyOptions(base, data)
	ctx, cancel := context.WithCancel(context.Background())
	o.hook = func(ev, run string, step int) {
		if ev == "step" && run == second && step == 6 {
			cancel()
		}
	}
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	cancel()
	runDir := filepath.Join("runs", second)
	boundary := func(dir string) map[string][]byte {
		m := map[string][]byte{}
		for _, name := range []string{"boundary-4.resume", "boundary-4.ckpt"} {
			m[name] = readOr(t, filepath.Join(dir, runDir, name))
		}
		return m
	}
	if b := boundary(base); b["boundary-4.resume"] == nil || b["boundary-4.ckpt"] == nil {
		t.Fatal("no boundary at step 4 to damage")
	}
	for _, tc := range []struct {
		name, file string // file relative to the experiment directory
		damage     func(path string) error
		repair     bool // repair the file and resume to the end
	}{
		{"boundary resume missing", filepath.Join(runDir, "boundary-4.resume"), os.Remove, false},
		{"boundary resume corrupt", filepath.Join(runDir, "boundary-4.resume"), truncate, true},
		{"boundary checkpoint corrupt", filepath.Join(runDir, "boundary-4.ckpt"), truncate, false},
		{"boundary checkpoint missing", filepath.Join(runDir, "boundary-4.ckpt"), os.Remove, true},
		{"manifest corrupt", ManifestFile, truncate, false},
		{"manifest missing", ManifestFile, os.Remove, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "exp")
			if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tc.file)
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			before := boundary(dir)
			_, err := Run(context.Background(), tinyOptions(dir, data))
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("resume: %v, want an error naming %s", err, path)
			}
			if after := boundary(dir); !equalDirs(before, after) {
				t.Errorf("the refused resume changed the boundary's files")
			}
			if !tc.repair {
				return
			}
			if err := os.WriteFile(path, readOr(t, filepath.Join(base, tc.file)), 0o644); err != nil {
				t.Fatal(err)
			}
			if res, err := Run(context.Background(), tinyOptions(dir, data)); err != nil || len(res.Models) != 3 {
				t.Fatalf("resume after the repair: %v", err)
			}
		})
	}
}

// truncate cuts a file to half its length.
func truncate(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b[:len(b)/2], 0o644)
}

// readOr returns the file's contents, nil if it does not exist.
func readOr(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b
}

func equalDirs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
