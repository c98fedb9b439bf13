package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args                []string
		wantHelp, wantErr   bool
		wantOut, wantErrOut string
	}{
		{args: []string{"-h"}, wantHelp: true, wantOut: "-n int"},
		{args: []string{"--help"}, wantHelp: true, wantOut: "-n int"},
		{args: []string{"-n", "3"}},
		{args: []string{"-bogus"}, wantErr: true, wantErrOut: "flag provided but not defined: -bogus"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			old := Stdout
			Stdout = &stdout
			defer func() { Stdout = old }()
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			fs.Int("n", 1, "a number")
			err := Parse(fs, tc.args)
			if got := errors.Is(err, flag.ErrHelp); got != tc.wantHelp {
				t.Errorf("help requested: %v, want %v (err %v)", got, tc.wantHelp, err)
			}
			if got := err != nil && !tc.wantHelp; got != tc.wantErr {
				t.Errorf("error: %v, want one: %v", err, tc.wantErr)
			}
			if !strings.Contains(stdout.String(), tc.wantOut) || (tc.wantOut == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.wantOut)
			}
			if !strings.Contains(stderr.String(), tc.wantErrOut) || (tc.wantErrOut == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.wantErrOut)
			}
			if fs.Output() != &stderr {
				t.Error("Parse did not restore the flag set's output")
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{fmt.Errorf("eval: %w", flag.ErrHelp), 0},
		{errors.New("boom"), 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestLists(t *testing.T) {
	for _, tc := range []struct {
		in      string
		names   []string
		ints    []int
		intsErr bool
	}{
		{in: "", names: nil, ints: nil},
		{in: "  ", names: nil, ints: nil},
		{in: "13", names: []string{"13"}, ints: []int{13}},
		{in: " 13 , 20,-1", names: []string{"13", "20", "-1"}, ints: []int{13, 20, -1}},
		{in: "a, b,,", names: []string{"a", "b"}, intsErr: true},
		{in: "1,,2", names: []string{"1", "2"}, intsErr: true},
		{in: "x", names: []string{"x"}, intsErr: true},
	} {
		if got := List(tc.in); !slices.Equal(got, tc.names) {
			t.Errorf("List(%q) = %q, want %q", tc.in, got, tc.names)
		}
		got, err := Ints(tc.in)
		if (err != nil) != tc.intsErr || !slices.Equal(got, tc.ints) {
			t.Errorf("Ints(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.ints, tc.intsErr)
		}
	}
}
