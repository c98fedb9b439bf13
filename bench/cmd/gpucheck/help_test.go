package main

import (
	"path/filepath"
	"testing"

	"rgcpred/base/cli/clitest"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0,
// in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	clitest.HelpFlags(t, "-windows", func(arg string) error { return run([]string{arg}) })
}

// TestBadFlags: a missing report path and a bad batch list are errors
// before anything runs.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--json", filepath.Join(t.TempDir(), "r.json"), "--batches", "64,x"},
		{"--json", filepath.Join(t.TempDir(), "r.json"), "--batches", "0"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestBadFlag: an unknown flag and a missing --json are usage errors that
// print no usage, only the error and a hint.
func TestBadFlag(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {}} {
		clitest.BadFlag(t, "gpucheck", func() error { return run(args) })
	}
}
