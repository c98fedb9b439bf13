package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/base/plot/plottest"
	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

func TestSynthCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "syn")
	var buf bytes.Buffer
	cfg := synth.Config{Cells: 3, Minutes: 1.5, Seed: 9}
	if err := synthesise(context.Background(), &buf, dir, cfg, true, false, true); err != nil {
		t.Fatal(err)
	}
	var s synthJSON
	if err := json.Unmarshal(buf.Bytes(), &s); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	rec, err := rgc.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Cells != 3 || s.Bins != rec.Bins || len(rec.QualityCells()) != 3 {
		t.Errorf("summary %+v, recording %d cells %d bins", s, len(rec.Cells), rec.Bins)
	}
	if s.NLL == nil || s.NLL.Windows == 0 {
		t.Fatalf("no NLL in the summary: %s", buf.String())
	}
	if !(s.NLL.Oracle < s.NLL.ZeroInput) {
		t.Errorf("oracle NLL %.4f not below the zero-input NLL %.4f", s.NLL.Oracle, s.NLL.ZeroInput)
	}
	if _, err := synth.OracleFromDir(dir); err != nil {
		t.Errorf("the written directory does not give an oracle: %v", err)
	}
	// Inspect reads it like the shipped recording.
	if sum := rgc.Summarise(rec); sum.Cells != 3 || sum.Stimulus.Frames != s.Frames {
		t.Errorf("inspect summary %+v", sum)
	}

	// Charts of the true filters.
	tr, err := synth.LoadTruth(dir)
	if err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(t.TempDir(), "filters.svg")
	if err := plotTruth(tr, svg); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{svg, strings.TrimSuffix(svg, ".svg") + "-history.svg"} {
		f, err := plottest.Read(p, strings.TrimSuffix(p, ".svg")+".png")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(f.Text, "cell 2 ("+tr.Cells[2].Type+")") || !strings.Contains(f.Text, "lag (ms)") {
			t.Errorf("%s is not a chart of the three cells against lag in ms", p)
		}
	}

	for _, tc := range []struct {
		args  []string
		match string
	}{
		{[]string{"--cells", "2"}, "--out is required"},
		{[]string{"--out", dir, "--cells", "0"}, "0 cells"},
		{[]string{"--out", dir, "--minutes", "-2"}, "minutes"},
		{[]string{"--out", dir, "--lookahead"}, "--lookahead needs --nll"},
		{[]string{"--out", dir, "extra"}, "unexpected arguments"},
	} {
		err := runSynth(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.match) {
			t.Errorf("synth %v: got %v, want an error containing %q", tc.args, err, tc.match)
		}
	}
}
