// Package clitest checks a command's usage against the conventions of
// package cli, for the commands' tests.
package clitest

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"rgcpred/base/cli"
)

// argName is what a flag's line may show after its name: one of the flag
// package's type words, or an upper-case name that help text set in back
// quotes (`DECAY`). Anything else is help text that reads as the argument.
var argName = regexp.MustCompile(`^(string|int|uint|int64|uint64|float|duration|value|[A-Z][A-Z0-9_.:]*)$`)

// Help runs a command's entry point with cli.Stdout captured and returns
// what it printed there. It fails t unless the run reports a requested
// usage (cli.ExitCode 0 with flag.ErrHelp or nil), the output starts with
// a synopsis "usage: ..." (continued on indented lines) and, after a blank
// line, a line saying what the command does, every flag's line names at most an argument (CheckFlags),
// and every line fits cli.MaxLine.
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
	lines := strings.Split(out, "\n")
	i := 1 // past the synopsis and its indented continuation lines
	for i < len(lines) && strings.HasPrefix(lines[i], " ") {
		i++
	}
	if !strings.HasPrefix(lines[0], "usage: ") || i+1 >= len(lines) || lines[i] != "" || strings.TrimSpace(lines[i+1]) == "" {
		t.Errorf("usage does not start with a synopsis \"usage: ...\", a blank line and a summary line: %.300q", out)
	}
	CheckFlags(t, out)
	for i, line := range lines {
		if n := len([]rune(line)); n > cli.MaxLine {
			t.Errorf("usage line %d has %d characters, want at most %d: %.80q...", i+1, n, cli.MaxLine, line)
		}
	}
	return out
}

// CheckFlags fails t for a flag line of usage (flag.PrintDefaults's
// "  -name ARG") whose ARG is not a type word or an upper-case name: Go's
// flag package takes the first back-quoted text of a flag's help as its
// argument's name, so help saying `trainer glm` renders "-glm-mix trainer
// glm".
func CheckFlags(t testing.TB, usage string) {
	t.Helper()
	for _, line := range strings.Split(usage, "\n") {
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		head, _, _ := strings.Cut(line, "\t")
		f := strings.Fields(head)
		if len(f) > 2 || (len(f) == 2 && !argName.MatchString(f[1])) {
			t.Errorf("flag line %q reads as if the flag took %q (back quotes in its help?)", line, strings.Join(f[1:], " "))
		}
	}
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

// BadFlag runs a command's entry point with cli.Stdout captured and fails
// t unless it returns a *cli.UsageError of command cmd, prints no usage,
// and cli.Message gives the error once and the hint on one more line.
func BadFlag(t testing.TB, cmd string, run func() error) {
	t.Helper()
	var buf bytes.Buffer
	old := cli.Stdout
	cli.Stdout = &buf
	defer func() { cli.Stdout = old }()
	err := run()
	ue, ok := errors.AsType[*cli.UsageError](err)
	switch {
	case !ok:
		t.Fatalf("error %v (%T), want a *cli.UsageError", err, err)
	case ue.Cmd != cmd:
		t.Errorf("usage error of %q, want %q", ue.Cmd, cmd)
	case buf.Len() > 0:
		t.Errorf("printed %d bytes of usage on a bad flag, want none", buf.Len())
	}
	msg := cli.Message("x", err)
	if lines := strings.Split(strings.TrimSuffix(msg, "\n"), "\n"); len(lines) != 2 || lines[1] != "run '"+cmd+" -h' for help" {
		t.Errorf("message %q, want the error and the hint on two lines", msg)
	}
}
