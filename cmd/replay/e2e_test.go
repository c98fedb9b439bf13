package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rgc/fakepred"
	"rgcpred/rollout"
	"rgcpred/serve/service"
)

// TestEmbeddedReplayMatchesOfflineRollout replays the shipped recording's
// test split as fast as possible through the in-process daemon serving a
// deterministic fake model, and checks that the written spike trains and
// the metrics equal those of the offline rollout (rollout.Run, what
// `trainer eval` runs) for the same model, cells and split.
func TestEmbeddedReplayMatchesOfflineRollout(t *testing.T) {
	for _, stagger := range []bool{true, false} {
		t.Run(fmt.Sprintf("stagger %v", stagger), func(t *testing.T) { testEmbeddedReplay(t, stagger) })
	}
}

func testEmbeddedReplay(t *testing.T, stagger bool) {
	rec, err := rgc.Load(shipped)
	if err != nil {
		t.Fatal(err)
	}
	q := rec.QualityClusterIDs()
	ids := []int{q[0], q[7], q[23], q[41]}
	load := func(string, int) (*service.Model, error) {
		return &service.Model{Predictor: fakepred.New(rec.ClusterIDs()), Cells: rec.ClusterIDs(), Name: "fake"}, nil
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	o, err := parseFlags([]string{"--data", shipped, "--embedded", "--as-fast-as-possible", "--quiet",
		"--cells", joinInts(ids), fmt.Sprintf("--stagger=%v", stagger),
		"--out", out}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := replayWith(context.Background(), o, &stdout, &stderr, load); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	t.Log(stdout.String())

	idx, err := rec.CellIndices(ids)
	if err != nil {
		t.Fatal(err)
	}
	off, err := rollout.Run(context.Background(), rec, fakepred.New(rec.ClusterIDs()), rollout.Options{Split: rgc.Test, Cells: idx, Stagger: stagger})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		got := readCounts(t, filepath.Join(out, "predicted", "cell_"+strconv.Itoa(id)+".npy"))
		rec := readCounts(t, filepath.Join(out, "recorded", "cell_"+strconv.Itoa(id)+".npy"))
		want := off.Trains[i]
		if len(got) != len(want.Generated) || len(rec) != len(want.Recorded) {
			t.Fatalf("cell %d: %d/%d bins, offline %d/%d", id, len(got), len(rec), len(want.Generated), len(want.Recorded))
		}
		n := 0
		for j := range got {
			if got[j] != want.Generated[j] || rec[j] != want.Recorded[j] {
				t.Fatalf("cell %d: bin %d: replay %v/%v, offline %v/%v", id, off.From+j, got[j], rec[j], want.Generated[j], want.Recorded[j])
			}
			n += int(got[j])
		}
		if n == 0 {
			t.Fatalf("cell %d: no predicted spikes", id)
		}
	}
	// The summary's metrics equal the evaluator's on the offline trains.
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Metrics replayScores `json:"metrics"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	m, _ := rollout.NewMetrics(rollout.DefaultSigmaMs, rgc.BinMs)
	var vr []float64
	for i, tr := range off.Trains {
		s, err := m.Compare(tr.Generated, tr.Recorded)
		if err != nil {
			t.Fatal(err)
		}
		if s != sum.Metrics.Cells[i].Scores {
			t.Fatalf("cell %d: replay scores %+v, offline %+v", tr.ClusterID, sum.Metrics.Cells[i].Scores, s)
		}
		vr = append(vr, s.VanRossum)
	}
	want, _ := rollout.Bootstrap(vr, rollout.DefaultResamples, 1)
	if sum.Metrics.VanRossum != want {
		t.Fatalf("van rossum summary %+v, offline %+v", sum.Metrics.VanRossum, want)
	}
	if !strings.Contains(stdout.String(), "(stale 0, skipped 0, lost at least 0 in 0 gaps, duplicated 0, other cells 0, cells missing their last decision 0)") {
		t.Fatalf("decisions skipped, stale or missing:\n%s", stdout.String())
	}
	if wantRule := map[bool]string{true: "staggered", false: "simultaneous"}[stagger]; !strings.Contains(stdout.String(), "start rule          "+wantRule) {
		t.Fatalf("report does not state the %s start rule:\n%s", wantRule, stdout.String())
	}
	if !strings.Contains(stdout.String(), "Van Rossum") {
		t.Fatalf("no metric table in output:\n%s", stdout.String())
	}
}

func joinInts(x []int) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func readCounts(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := rgc.ReadNPY(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	v, err := a.Float64s()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
