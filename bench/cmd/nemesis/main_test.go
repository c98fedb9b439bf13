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
	clitest.HelpFlags(t, "-schedules", func(arg string) error {
		return run(context.Background(), []string{arg}, io.Discard, io.Discard)
	})
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--instances", "4"}, "--instances 4"},
		{[]string{"--seconds", "2"}, "--seconds 2"},
		{[]string{"--schedules", "0"}, "--schedules must be at least 1"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		if _, err := parseFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		}
	}
	o, err := parseFlags([]string{"--schedules", "0", "--soak", "1h", "--dir", "/tmp/x", "--auth-keys"}, io.Discard)
	if err != nil || o.soak.Hours() != 1 || o.setup.Bin != "/tmp/x/bin" || !o.setup.AuthKeys {
		t.Fatalf("%+v, %v", o, err)
	}
	if err := run(context.Background(), []string{"--faults", "explode"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--faults") {
		t.Fatalf("unknown fault: %v", err)
	}
	if err := run(context.Background(), []string{"--faults", "kill-record-leader"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "flight recorder") {
		t.Fatalf("kill-record-leader without --record: %v", err)
	}
}
