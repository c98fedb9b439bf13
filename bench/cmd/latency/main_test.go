package main

import (
	"bytes"
	"context"
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
