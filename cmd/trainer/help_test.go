package main

import (
	"context"
	"sort"
	"strings"
	"testing"

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
