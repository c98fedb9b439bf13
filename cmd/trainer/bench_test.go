package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchCommand times a small model alone (no PyTorch peer) with a CPU
// profile, and checks the profile is written (a gzip stream, as pprof
// writes) and bad flags are refused.
func TestBenchCommand(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	args := []string{"--configs", "gpt-a-cat-cpu", "--batch", "4", "--steps", "2", "--rounds", "1", "--torchref", "", "--cpuprofile", prof}
	if err := runBench(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("profile is not a gzip stream: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || len(b) == 0 {
		t.Fatalf("profile: %d bytes, %v", len(b), err)
	}
	if !bytes.Contains(b, []byte("samples")) {
		t.Errorf("profile has no sample type")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "0"}, "at least 1"},
		{[]string{"--configs", "gpt-z-cat", "--torchref", ""}, "gpt-z"},
		{[]string{"--cpuprofile", filepath.Join(t.TempDir(), "no", "dir", "p.prof"), "--torchref", ""}, "--cpuprofile"},
	} {
		if err := runBench(context.Background(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}
