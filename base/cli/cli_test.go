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
		args              []string
		wantHelp, wantErr bool
		wantOut, wantMsg  string
	}{
		{args: []string{"-h"}, wantHelp: true, wantOut: "usage: x run [flags]\n\nRun x.\n\nflags:\n  -n int"},
		{args: []string{"--help"}, wantHelp: true, wantOut: "usage: x run [flags]\n\nRun x.\n\nflags:\n  -n int"},
		{args: []string{"-n", "3"}},
		{args: []string{"-bogus"}, wantErr: true,
			wantMsg: "x: flag provided but not defined: -bogus\nrun 'x run -h' for help\n"},
		{args: []string{"-n", "three"}, wantErr: true,
			wantMsg: "x: invalid value \"three\" for flag -n: parse error\nrun 'x run -h' for help\n"},
		{args: []string{"a"}, wantErr: true, wantMsg: "x: unexpected arguments [\"a\"]\nrun 'x run -h' for help\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			old := Stdout
			Stdout = &stdout
			defer func() { Stdout = old }()
			fs := NewFlagSet("x run", "[flags]", "Run x.")
			fs.SetOutput(&stderr)
			fs.Int("n", 1, "a number")
			err := NoArgs(fs, tc.args)
			if got := errors.Is(err, flag.ErrHelp); got != tc.wantHelp {
				t.Errorf("help requested: %v, want %v (err %v)", got, tc.wantHelp, err)
			}
			if got := err != nil && !tc.wantHelp; got != tc.wantErr {
				t.Errorf("error: %v, want one: %v", err, tc.wantErr)
			}
			if !strings.HasPrefix(stdout.String(), tc.wantOut) || (tc.wantOut == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want it to start with %q", stdout.String(), tc.wantOut)
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr %q, want nothing (the caller prints the error once)", stderr.String())
			}
			if tc.wantErr {
				if got := Message("x", err); got != tc.wantMsg {
					t.Errorf("Message = %q, want %q", got, tc.wantMsg)
				}
			}
			if fs.Output() != &stderr {
				t.Error("Parse did not restore the flag set's output")
			}
		})
	}
}

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("resume: gone"), "train: resume: gone"},
		{errors.New("train: resume: gone"), "train: resume: gone"},
		{errors.New("trainer: x"), "train: trainer: x"},
	} {
		got := Prefix("train", tc.err)
		if got.Error() != tc.want || !errors.Is(got, tc.err) {
			t.Errorf("Prefix(train, %v) = %v, want %q wrapping the error", tc.err, got, tc.want)
		}
	}
	if Prefix("train", nil) != nil {
		t.Error("Prefix of nil is not nil")
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("boom"), "x: boom\n"},
		{errors.New("x: boom"), "x: boom\n"},
		{errors.New("xy: boom"), "x: xy: boom\n"},
		{fmt.Errorf("train: %w", errors.New("train: resume: gone")), "x: train: train: resume: gone\n"},
		{fmt.Errorf("eval: %w", &UsageError{Cmd: "x eval", Err: errors.New("--data is required")}),
			"x: eval: --data is required\nrun 'x eval -h' for help\n"},
	} {
		if got := Message("x", tc.err); got != tc.want {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
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
