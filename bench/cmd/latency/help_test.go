package main

import (
	"context"
	"testing"

	"rgcpred/base/cli/clitest"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0,
// in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	clitest.HelpFlags(t, "-cells", func(arg string) error { return run(context.Background(), []string{arg}) })
}

// TestBadFlag: an unknown flag or an argument is a usage error that prints
// no usage, only the error and a hint.
func TestBadFlag(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"extra"}} {
		clitest.BadFlag(t, "latency", func() error { return run(context.Background(), args) })
	}
}
