package sgemm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// generatedFiles are the assembly files gen_kernels.go writes.
var generatedFiles = []string{"kernel_amd64.s", "bf16_amd64.s", "int8_amd64.s"}

// TestGeneratedAssemblyIsCurrent runs gen_kernels.go into a temporary
// directory and requires each committed .s file to equal its output byte
// for byte, so that an edit to the generator or to a generated file alone
// fails here. Fix: go generate ./base/sgemm, then commit both.
func TestGeneratedAssemblyIsCurrent(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to run the generator: %v", err)
	}
	// Read here so that go test's cache keys on the generator too (files
	// the child process reads are not tracked).
	if _, err := os.ReadFile("gen_kernels.go"); err != nil {
		t.Fatalf("generator source: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(goTool, "run", "gen_kernels.go", "-dir", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_kernels.go: %v\n%s", err, out)
	}
	for _, name := range generatedFiles {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("generator output: %v", err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("committed file: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from gen_kernels.go's output at line %d; run go generate ./base/sgemm and commit the result",
				name, firstDiffLine(got, want))
		}
	}
}

// firstDiffLine returns the 1-based number of the first line where a and b
// differ (one past the shorter's last line when one is a prefix of the other).
func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
