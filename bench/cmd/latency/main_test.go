package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rgcpred/bench"
)

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("60, 1,5,5,120")
	if err != nil || !slices.Equal(got, []int{1, 5, 60, 120}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-3", "1,x", "1,,2"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestNoModel: --ckpt none serves a hash of each window, so the run
// measures the daemon and the transport alone; it has nothing to reload.
func TestNoModel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := run(context.Background(), []string{"--data", "../../../data/chicken-17-08-21", "--ckpt", NoModel,
		"--cells", "2", "--seconds", "0.3", "--json", path, "--svg", ""}); err != nil {
		t.Fatal(err)
	}
	rep, err := bench.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 1 || rep.Points[0].Decisions == 0 || rep.Points[0].Predictions == 0 || !strings.HasPrefix(rep.ModelInfo, "none") {
		t.Fatalf("report %+v", rep)
	}
	err = run(context.Background(), []string{"--data", "../../../data/chicken-17-08-21", "--ckpt", NoModel, "--reload-every", "1s", "--json", "", "--svg", ""})
	if err == nil || !strings.Contains(err.Error(), "nothing to reload") {
		t.Fatalf("--reload-every with no model: %v", err)
	}
}

// TestDefaultOutputUnderOut: without --json and --svg the run writes under
// out/ of the working directory, never over the committed
// docs/bench-latency.* (redrawing the committed report here).
func TestDefaultOutputUnderOut(t *testing.T) {
	committed, err := filepath.Abs("../../../docs/bench-latency.json")
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := run(context.Background(), []string{"--from-json", committed}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"out/bench-latency.svg", "out/bench-latency.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("default output %s: %v", f, err)
		}
	}
	if after, err := os.ReadFile(committed); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the committed report changed (err %v)", err)
	}
}

// TestRealTimeCompare: --realtime measures the mode off and on, quiet and
// beside a job (here one that only sleeps), each with the host's wake-up
// floor, and writes them all to one report.
func TestRealTimeCompare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rt.json")
	if err := run(context.Background(), []string{"--data", "../../../data/chicken-17-08-21", "--ckpt", NoModel,
		"--cells", "2", "--seconds", "0.3", "--json", "", "--svg", "", "--realtime", "--beside", "sleep 60",
		"--probe-seconds", "0.05", "--rt-json", path}); err != nil {
		t.Fatal(err)
	}
	var rep bench.RTReport
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"quiet", "off"}, {"quiet", "on"}, {"sleep 60", "off"}, {"sleep 60", "on"}}
	if len(rep.Rows) != len(want) || rep.Applied == "" {
		t.Fatalf("%d rows, applied %q; want %d rows", len(rep.Rows), rep.Applied, len(want))
	}
	for i, row := range rep.Rows {
		if [2]string{row.Beside, row.Mode} != want[i] || row.Floor.N != 50 || len(row.Points) != 1 || row.Points[0].Decisions == 0 ||
			row.Points[0].Tail == nil {
			t.Errorf("row %d: %s/%s, floor of %d sleeps, %d points; want %v, 50 sleeps, one traced point with decisions",
				i, row.Beside, row.Mode, row.Floor.N, len(row.Points), want[i])
		}
	}
}
