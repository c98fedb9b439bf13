package main

import (
	"context"
	"strings"
	"testing"

	"rgcpred/base/cli/clitest"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0,
// in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		t.Run(arg, func(t *testing.T) {
			out := clitest.Help(t, func() error { return run(context.Background(), []string{arg}) })
			if !strings.Contains(out, "-cells") {
				t.Errorf("usage lacks --cells:\n%s", out)
			}
		})
	}
}
