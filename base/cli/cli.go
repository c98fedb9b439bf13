// Package cli holds the command-line conventions every command follows:
// -h and --help print the usage to stdout and exit 0, a flag error prints
// the error and the usage to stderr and exits with a failure, a flag's
// help fits in two terminal lines (details live in the docs), and a list
// value is comma-separated (List, Ints).
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

// Parse parses args into fs. On -h or --help it writes fs's usage to Stdout
// and returns flag.ErrHelp; on a bad flag the error and the usage go to
// fs's own output, as flag.FlagSet.Parse writes them.
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	dst := out
	if errors.Is(err, flag.ErrHelp) {
		dst = Stdout
	}
	if _, werr := dst.Write(buf.Bytes()); werr != nil && err == nil {
		err = fmt.Errorf("write usage: %w", werr)
	}
	return err
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
// 0 after a requested usage, and otherwise prints "name: err" to stderr and
// exits 1.
func Exit(name string, err error) {
	if err == nil {
		return
	}
	code := ExitCode(err)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	os.Exit(code)
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
