// Package clitest checks a command's usage against the conventions of
// package cli, for the commands' tests.
package clitest

import (
	"bytes"
	"strings"
	"testing"

	"rgcpred/base/cli"
)

// Help runs a command's entry point with cli.Stdout captured and returns
// what it printed there. It fails t unless the run reports a requested
// usage (cli.ExitCode 0 with flag.ErrHelp or nil), the output starts with
// "usage:", and every line fits cli.MaxLine.
func Help(t testing.TB, run func() error) string {
	t.Helper()
	var buf bytes.Buffer
	old := cli.Stdout
	cli.Stdout = &buf
	defer func() { cli.Stdout = old }()
	err := run()
	if code := cli.ExitCode(err); code != 0 {
		t.Fatalf("exit status %d (%v), want 0", code, err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "usage:") && !strings.HasPrefix(out, "Usage") {
		t.Errorf("usage on stdout does not start with \"usage:\": %.200q", out)
	}
	for i, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > cli.MaxLine {
			t.Errorf("usage line %d has %d characters, want at most %d: %.80q...", i+1, n, cli.MaxLine, line)
		}
	}
	return out
}

// HelpFlags runs Help for both -h and --help, each as a subtest, with
// run given the flag; the usage must contain want.
func HelpFlags(t *testing.T, want string, run func(flag string) error) {
	t.Helper()
	for _, arg := range []string{"-h", "--help"} {
		t.Run(arg, func(t *testing.T) {
			if out := Help(t, func() error { return run(arg) }); !strings.Contains(out, want) {
				t.Errorf("usage lacks %q:\n%s", want, out)
			}
		})
	}
}
