// Package cli holds the command-line conventions every command follows:
// -h and --help print the usage to stdout and exit 0, a flag error prints
// the error and the usage to stderr and exits with a failure, and a flag's
// help fits in two terminal lines (details live in the docs).
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
