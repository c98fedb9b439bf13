package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"rgcpred/base/cli"
	"rgcpred/base/cli/clitest"
)

// TestHelp checks that -h and --help print the usage to stdout and exit 0
// for trainer and every subcommand, in lines that fit cli.MaxLine.
func TestHelp(t *testing.T) {
	var names []string
	for n := range commands() {
		names = append(names, n)
	}
	sort.Strings(names)
	type tc struct {
		name string
		args []string
		want string // a string the usage must contain
	}
	cases := []tc{
		{"trainer -h", []string{"-h"}, "import-kilosort"},
		{"trainer --help", []string{"--help"}, "fit-threshold"},
		{"trainer help", []string{"help"}, "experiment"},
	}
	for _, n := range names {
		cases = append(cases, tc{n + " -h", []string{n, "-h"}, "-"}, tc{n + " --help", []string{n, "--help"}, "-"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := clitest.Help(t, func() error { return run(context.Background(), c.args) })
			if !strings.Contains(out, c.want) {
				t.Errorf("usage lacks %q:\n%s", c.want, out)
			}
		})
	}
}

// TestUsageColumns checks that the command list's summaries start in one
// column, past the longest name.
func TestUsageColumns(t *testing.T) {
	out := clitest.Help(t, func() error { return run(context.Background(), []string{"-h"}) })
	cmds := commands()
	col := -1
	for n, c := range cmds {
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  "+n+" ") {
				line = l
			}
		}
		i := strings.Index(line, c.summary)
		switch {
		case line == "" || i < 0:
			t.Fatalf("no line for %s in:\n%s", n, out)
		case i < len(n)+3:
			t.Errorf("%s: summary at column %d, inside the name", n, i)
		case col >= 0 && i != col:
			t.Errorf("%s: summary at column %d, others at %d", n, i, col)
		}
		col = i
	}
}

// TestBadFlag: for trainer and every subcommand, an unknown flag is a usage
// error naming the command, with no usage printed, only the error and a
// hint; so are a missing command and an unknown one.
func TestBadFlag(t *testing.T) {
	cases := []struct {
		cmd  string
		args []string
	}{{"trainer", nil}, {"trainer", []string{"bogus"}}}
	for n := range commands() {
		cases = append(cases, struct {
			cmd  string
			args []string
		}{"trainer " + n, []string{n, "--bogus"}})
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			clitest.BadFlag(t, c.cmd, func() error { return run(context.Background(), c.args) })
		})
	}
}

// TestErrorsSayOnce: a subcommand's error does not repeat the subcommand's
// name when the library already says it, and eval finds a bad checkpoint
// before printing anything.
func TestErrorsSayOnce(t *testing.T) {
	notCkpt := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(notCkpt, []byte("# notes on the recording, not a checkpoint\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args       []string
		want       string
		wantStdout string
	}{
		{[]string{"train", "--data", shippedDir, "--resume", filepath.Join(t.TempDir(), "gone.resume"), "--steps", "1"}, "trainer: train: resume: ", ""},
		{[]string{"eval", "--data", shippedDir, "--ckpt", notCkpt}, "trainer: eval: --ckpt: load checkpoint " + notCkpt + ": checkpoint: bad magic", ""},
		{[]string{"eval", "--data", shippedDir, "--glm", notCkpt}, "not a GLM file", ""},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			err := run(context.Background(), c.args)
			if err == nil {
				t.Fatal("no error")
			}
			msg := cli.Message("trainer", err)
			if !strings.Contains(msg, c.want) {
				t.Errorf("message %q lacks %q", msg, c.want)
			}
			for _, s := range []string{"train: train:", "eval: eval:"} {
				if strings.Contains(msg, s) {
					t.Errorf("message %q says %q", msg, s)
				}
			}
			if strings.Count(msg, notCkpt) > 1 {
				t.Errorf("message %q names %s more than once", msg, notCkpt)
			}
		})
	}
}
