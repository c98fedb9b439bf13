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
