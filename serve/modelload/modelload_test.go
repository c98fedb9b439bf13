package modelload

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	// The test runs in serve/modelload: a repository-relative path
	// resolves through the repository root.
	p, err := Resolve("serve/modelload/modelload.go")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Contains(b, []byte("package modelload")) {
		t.Fatalf("resolved %s: %v", p, err)
	}
	if p, err := Resolve("modelload.go"); err != nil || p != "modelload.go" {
		t.Errorf("a path in the working directory resolved to %q, %v; want it as is", p, err)
	}
	_, err = Resolve("models/nope.ckpt")
	if err == nil || !strings.Contains(err.Error(), "models/nope.ckpt not found") || !strings.Contains(err.Error(), "--model") {
		t.Errorf("missing model error %v", err)
	}
	abs := filepath.Join(t.TempDir(), "nope.ckpt")
	if _, err := Resolve(abs); err == nil || !strings.Contains(err.Error(), abs) {
		t.Errorf("missing absolute path: %v", err)
	}
}

func TestRepoRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := RepoRoot(wd)
	if root == "" || filepath.Join(root, "serve", "modelload") != wd {
		t.Errorf("RepoRoot(%s) = %q", wd, root)
	}
	if got := RepoRoot(t.TempDir()); got != "" {
		t.Errorf("RepoRoot of a temporary directory = %q, want none", got)
	}
}
