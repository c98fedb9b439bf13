package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/rollout"
)

func TestMetricsCommand(t *testing.T) {
	dir := t.TempDir()
	n := 500
	ai, bf := make([]int64, n), make([]float64, n)
	af := make([]float64, n)
	for i := 0; i < n; i += 37 {
		ai[i] = 1
		af[i] = 1
	}
	for i := 5; i < n; i += 41 {
		bf[i] = 1
	}
	writeNPY(t, filepath.Join(dir, "a.npy"), ai, []int{n})
	writeNPY(t, filepath.Join(dir, "b.npy"), bf, []int{n})
	writeNPY(t, filepath.Join(dir, "short.npy"), bf[:n-1], []int{n - 1})
	writeNPY(t, filepath.Join(dir, "2d.npy"), bf, []int{20, 25})
	if err := os.WriteFile(filepath.Join(dir, "junk.npy"), []byte("not an npy file"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	// Flags in any order.
	for _, args := range [][]string{
		{"--a", a, "--b", b, "--sigma-ms", "10", "--bin-ms", "2", "--json"},
		{"--json", "--bin-ms", "2", "--b", b, "--sigma-ms", "10", "--a", a},
	} {
		out, err := captureStdout(t, func() error { return runMetrics(context.Background(), args) })
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var got map[string]float64
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		m, _ := rollout.NewMetrics(10, 2) // tau 5 bins
		want, _ := m.Compare(af, bf)
		if len(got) != 3 || got["van_rossum"] != want.VanRossum || got["schreiber"] != want.Schreiber || got["pearson"] != want.Pearson {
			t.Errorf("%v: got %v, want %+v", args, got, want)
		}
		if want.VanRossum == 0 || want.Schreiber <= 0 {
			t.Fatalf("degenerate expectation %+v", want)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--a", a, "--b", filepath.Join(dir, "short.npy"), "--json"}, "differ in length"},
		{[]string{"--a", a, "--b", filepath.Join(dir, "2d.npy")}, "1-D"},
		{[]string{"--a", filepath.Join(dir, "junk.npy"), "--b", b}, "junk.npy"},
		{[]string{"--a", filepath.Join(dir, "missing.npy"), "--b", b}, "missing.npy"},
		{[]string{"--a", a}, "required"},
		{[]string{"--a", a, "--b", b, "--sigma-ms", "-1"}, "smoothing"},
	} {
		_, err := captureStdout(t, func() error { return runMetrics(context.Background(), tc.args) })
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.msg)
		}
	}
}
