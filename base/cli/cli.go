// Package cli holds the command-line conventions every command follows:
// the usage starts with a synopsis line and a line saying what the command
// does (NewFlagSet); -h and --help print it to stdout and exit 0; a flag
// error prints the error and a one-line hint to stderr and exits with a
// failure (UsageError, Exit); a flag's help fits in two terminal lines
// (details live in the docs); and a list value is comma-separated (List,
// Ints).
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxLine is the longest line a command's usage may print: two lines of an
// 80-column terminal.
const MaxLine = 160

// Stdout is where Parse writes a requested usage.
var Stdout io.Writer = os.Stdout

// NewFlagSet returns a flag set for the command name ("trainer eval")
// whose usage reads "usage: name synopsis", then summary (one sentence on
// what the command does), then the flags. Errors are returned, not
// printed (flag.ContinueOnError).
func NewFlagSet(name, synopsis, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s %s\n\n%s\n\nflags:\n", name, synopsis, summary)
		fs.PrintDefaults()
	}
	return fs
}

// UsageError is a command-line mistake (a flag that does not parse, a
// missing argument): Exit prints it with a hint to run Cmd -h.
type UsageError struct {
	Cmd string // the command as typed, e.g. "trainer eval"
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Hint is the line that follows a usage error.
func (e *UsageError) Hint() string { return fmt.Sprintf("run '%s -h' for help", e.Cmd) }

// Usagef returns a UsageError of fs's command with the formatted message.
func Usagef(fs *flag.FlagSet, format string, args ...any) error {
	return &UsageError{Cmd: fs.Name(), Err: fmt.Errorf(format, args...)}
}

// Parse parses args into fs. On -h or --help it writes fs's usage to Stdout
// and returns flag.ErrHelp; a bad flag is returned as a *UsageError, with
// nothing printed (Exit prints it and the hint).
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if _, werr := Stdout.Write(buf.Bytes()); werr != nil {
			return fmt.Errorf("write usage: %w", werr)
		}
		return err
	case err != nil:
		return &UsageError{Cmd: fs.Name(), Err: err}
	}
	return nil
}

// NoArgs parses args into fs (Parse) and rejects positional arguments.
func NoArgs(fs *flag.FlagSet, args []string) error {
	if err := Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return Usagef(fs, "unexpected arguments %q", fs.Args())
	}
	return nil
}

// IsHelp reports whether arg asks for the usage (-h, -help, --help).
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

// ExitCode is the exit status for a command's error: 0 for none or a
// requested usage (flag.ErrHelp), 1 otherwise.
func ExitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

// Exit ends a command that returned err: it returns for a nil error, exits
// 0 after a requested usage, and otherwise prints Message to stderr and
// exits 1.
func Exit(name string, err error) {
	if err == nil {
		return
	}
	code := ExitCode(err)
	if code != 0 {
		fmt.Fprint(os.Stderr, Message(name, err))
	}
	os.Exit(code)
}

// Message is what a command named name prints for err: Prefix(name, err)
// on a line, and for a usage error a second line with its hint.
func Message(name string, err error) string {
	msg := Prefix(name, err).Error() + "\n"
	if ue, ok := errors.AsType[*UsageError](err); ok {
		msg += ue.Hint() + "\n"
	}
	return msg
}

// Prefix returns err with "name: " in front, or err itself when its text
// already starts so (a library that names itself, as train.Run's "train:",
// under the subcommand of the same name): each thing is said once. A nil
// err stays nil.
func Prefix(name string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// List splits a comma-separated list of names, trimming spaces and
// dropping empty items ("a, b,," is [a b]).
func List(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Ints parses a comma-separated list of integers, spaces allowed around
// each; an empty or blank s gives none. An empty item or one that is not an
// integer is an error naming it.
func Ints(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, v := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		out = append(out, n)
	}
	return out, nil
}
