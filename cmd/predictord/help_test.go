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
	clitest.HelpFlags(t, "-precision", func(arg string) error {
		return run(context.Background(), []string{arg}, io.Discard, nil, nil)
	})
}

// TestBadFlag: an unknown flag or an argument is a usage error that prints
// no usage, only the error and a hint.
func TestBadFlag(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--threads", "two"}} {
		clitest.BadFlag(t, "predictord", func() error { return run(context.Background(), args, io.Discard, nil, nil) })
	}
}
