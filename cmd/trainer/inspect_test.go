package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/rgc"
)

const shippedDir = "../../data/chicken-17-08-21"

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{rgc.FileJSON, rgc.FilePattern, rgc.FileTriggers, rgc.FileSamples} {
		b, err := os.ReadFile(filepath.Join(shippedDir, n))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{dir, "--json"}, "spike_offsets.npy: missing file"},
		{[]string{}, "exactly one recording directory"},
		{[]string{"a", "b"}, "exactly one recording directory"},
		{[]string{"--bogus", shippedDir}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		err := runInspect(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("inspect %v: err = %v, want containing %q", tc.args, err, tc.want)
		}
	}
}
