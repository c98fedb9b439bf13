package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"rgcpred/bench/replay"
	"rgcpred/rgc"
)

const shipped = "../../data/chicken-17-08-21"

func TestParseFlags(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
		speed   float64
	}{
		{[]string{"--data", "d"}, "", 1},
		{[]string{"--data", "d", "--speed", "4"}, "", 4},
		{[]string{"--data", "d", "--as-fast-as-possible"}, "", 0},
		{[]string{}, "--data is required", 0},
		{[]string{"--data", "d", "--speed", "0"}, "must be positive", 0},
		{[]string{"--data", "d", "--speed", "-2"}, "must be positive", 0},
		{[]string{"--data", "d", "--seconds", "-1"}, "must not be negative", 0},
		{[]string{"--data", "d", "--device", "a.b"}, "not allowed", 0},
		{[]string{"--data", "d", "extra"}, "unexpected arguments", 0},
		{[]string{"--data", "d", "--raster", "r.svg", "--raster-cells", "3,7"}, "", 1},
		{[]string{"--data", "d", "--raster", "r.gif"}, `extension ".gif"`, 0},
		{[]string{"--data", "d", "--raster", "r.png", "--raster-seconds", "0"}, "--raster-seconds", 0},
		{[]string{"--data", "d", "--raster", "r.png", "--raster-cells", "3,x"}, "--raster-cells", 0},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		o, err := parseFlags(c.args, &stderr)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want %q", c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if o.speed != c.speed {
			t.Errorf("%v: speed %v, want %v", c.args, o.speed, c.speed)
		}
	}
}

func TestStretchAndCells(t *testing.T) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	from, to, err := stretch(rec, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if wf, wt := rec.SplitRange(rgc.Test); from != wf || to != wt {
		t.Fatalf("test stretch %d..%d, want %d..%d", from, to, wf, wt)
	}
	rate := rgc.BinRateHz
	if from, to, err = stretch(rec, "all", 10); err != nil || from != 0 || to != rgc.WindowBins+int(10*rate) {
		t.Fatalf("all, 10 s: %d..%d, %v", from, to, err)
	}
	if _, _, err := stretch(rec, "bogus", 0); err == nil {
		t.Fatal("bogus split accepted")
	}
	ids, err := selectCells(rec, "quality")
	if err != nil || len(ids) != 60 {
		t.Fatalf("quality cells: %d, %v; want 60", len(ids), err)
	}
	if ids, err := selectCells(rec, "all"); err != nil || len(ids) != len(rec.Cells) {
		t.Fatalf("all cells: %d, %v", len(ids), err)
	}
	if ids, err := selectCells(rec, " 13 ,"+strconv.Itoa(rec.Cells[5].ClusterID)); err != nil || len(ids) != 2 || ids[0] != 13 {
		t.Fatalf("explicit cells: %v, %v", ids, err)
	}
	for _, bad := range []string{"x", "99999", "1,,2"} {
		if _, err := selectCells(rec, bad); err == nil {
			t.Errorf("--cells %q accepted", bad)
		}
	}
}

func TestOnTimeDropsLateSpikes(t *testing.T) {
	res := &replay.Result{
		Spikes:   [][]int{{10, 20, 30}, {5}, nil},
		LateBins: [][]int{{20}, {5}, nil},
	}
	got := onTime(res)
	want := [][]int{{10, 30}, nil, nil}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("cell %d: %v, want %v", i, got[i], want[i])
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("cell %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
}

// TestReportVocabulary: the summary names both kinds of missed deadline,
// skipped and late, and their sum, as the metrics and the latency report
// do (docs/operations.md).
func TestReportVocabulary(t *testing.T) {
	res := &replay.Result{Skipped: 52, LateDecisions: 4, Decisions: 1000}
	res.Late.Paced = true
	var buf bytes.Buffer
	printReport(&buf, &rgc.Recording{Name: "rec"}, &options{device: "dev0", split: "test"}, res, nil, nil, &replayScores{}, nil)
	out := buf.String()
	for _, want := range []string{"skipped 52", "late decisions      4 (received after their 80-bin period ended)",
		"deadline misses     56 (skipped 52 + late 4)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
