package main

import (
	"context"
	"io"
	"testing"

	"rgcpred/base/cli/clitest"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0,
// in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	clitest.HelpFlags(t, "-data", func(arg string) error {
		return run(context.Background(), []string{arg}, io.Discard, io.Discard)
	})
}

// TestBadFlag: an unknown flag and a missing --data are usage errors that
// print no usage, only the error and a hint.
func TestBadFlag(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {}, {"--data", "x", "extra"}} {
		clitest.BadFlag(t, "replay", func() error { return run(context.Background(), args, io.Discard, io.Discard) })
	}
}
