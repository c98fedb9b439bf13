package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
	"rgcpred/rgc/testrec"
	"rgcpred/rollout"
	"rgcpred/serve/modelload"
	"rgcpred/serve/service"
)

// TestEmbeddedOracleOnSynthetic replays a synthetic recording through the
// in-process daemon serving its exact oracle, as fast as possible, and
// checks the predicted trains against the offline rollout of the oracle,
// and the decisions with the history check (--check).
func TestEmbeddedOracleOnSynthetic(t *testing.T) {
	dir := testrec.SynthDir(t, synth.Config{Cells: 3, Minutes: 1.5, Seed: 5})
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	o, err := parseFlags([]string{"--data", dir, "--embedded", "--oracle", "--as-fast-as-possible", "--quiet",
		"--cells", "all", "--out", out, "--check"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	load := func(string, int) (*service.Model, error) { return modelload.Oracle(dir, o.stim) }
	if err := replayWith(context.Background(), o, &stdout, &stderr, load); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	t.Log(stdout.String())
	if !strings.Contains(stdout.String(), "history check       PASS") || !strings.Contains(stdout.String(), "lost 0, duplicated 0, wrong 0") {
		t.Fatal("the history check of an undisturbed replay did not pass")
	}
	rec, err := rgc.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	orc, err := synth.OracleFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Staggered: the embedded daemon's default --stagger.
	off, err := rollout.Run(context.Background(), rec, orc, rollout.Options{Split: rgc.Test, Cells: []int{0, 1, 2}, Stagger: true})
	if err != nil {
		t.Fatal(err)
	}
	spikes := 0
	for _, want := range off.Trains {
		got := readCounts(t, filepath.Join(out, "predicted", "cell_"+strconv.Itoa(want.ClusterID)+".npy"))
		if len(got) != len(want.Generated) {
			t.Fatalf("cell %d: %d bins, offline %d", want.ClusterID, len(got), len(want.Generated))
		}
		for j := range got {
			spikes += int(got[j])
			if got[j] != want.Generated[j] {
				t.Fatalf("cell %d: bin %d: replay %v, offline %v", want.ClusterID, off.From+j, got[j], want.Generated[j])
			}
		}
	}
	if spikes == 0 {
		t.Fatal("the oracle predicted no spike at all; the comparison is vacuous")
	}
}
