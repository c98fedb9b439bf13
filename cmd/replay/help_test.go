package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"rgcpred/base/cli/clitest"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0,
// in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		t.Run(arg, func(t *testing.T) {
			out := clitest.Help(t, func() error { return run(context.Background(), []string{arg}, io.Discard, io.Discard) })
			if !strings.Contains(out, "-data") {
				t.Errorf("usage lacks --data:\n%s", out)
			}
		})
	}
}
