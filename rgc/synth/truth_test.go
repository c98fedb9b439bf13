package synth

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"rgcpred/rgc"
)

// smallTruth returns a valid one-cell truth with short filters and the
// default frame lengths, and its JSON.
func smallTruth(t testing.TB) (*Truth, []byte) {
	t.Helper()
	tr := &Truth{Seed: 1, BinRateHz: rgc.BinRateHz, FrameLengths: DefaultFrameLengths()}
	c := CellParams{ClusterID: 0, Type: "on", NominalRateHz: 2, Bias: -6, HistFilter: []float64{-3, -1}}
	for ch := range c.StimFilter {
		c.StimFilter[ch] = make([]float64, 60)
		c.StimFilter[ch][MinLatencyBins] = 0.5
	}
	tr.Cells = []CellParams{c}
	data, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return tr, data
}

// smallRecording generates a short one-cell synthetic recording (cluster
// id 0) into a new directory and returns it with the directory.
func smallRecording(t testing.TB) (*rgc.Raw, string) {
	t.Helper()
	tr, _ := smallTruth(t)
	raw, _, err := Generate(context.Background(), Config{Cells: 1, Minutes: 0.05, Seed: 5, Params: tr.Cells})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := raw.Write(dir); err != nil {
		t.Fatal(err)
	}
	return raw, dir
}

// TestLoadTruthHostile writes truth.json files whose size fields are huge,
// negative or non-finite next to a valid recording: LoadTruth and
// OracleFromDir must fail with an error naming the file and the field,
// allocating little (at most maxAllocBytes) and never panicking.
func TestLoadTruthHostile(t *testing.T) {
	const maxAllocBytes = 64 << 20
	_, dir := smallRecording(t)
	_, good := smallTruth(t)
	js := string(good)
	repl := func(old, new string) []byte {
		if !strings.Contains(js, old) {
			t.Fatalf("%q not in the truth JSON", old)
		}
		return []byte(strings.Replace(js, old, new, 1))
	}
	cases := []struct {
		name    string
		content []byte // nil: a sparse file just over MaxTruthBytes
		want    string
	}{
		{"valid", good, ""},
		{"frame length 1e15", repl(`{"bins":45,`, `{"bins":1000000000000000,`), "frame_lengths[0]: length 1000000000000000 bins, want 1..58254"},
		{"frame length max int", repl(`{"bins":45,`, `{"bins":9223372036854775807,`), "frame_lengths[0]: length 9223372036854775807 bins, want 1..58254"},
		{"frame length just over", repl(`{"bins":45,`, `{"bins":58255,`), "frame_lengths[0]: length 58255 bins, want 1..58254"},
		{"frame length negative", repl(`{"bins":45,`, `{"bins":-45,`), "frame_lengths[0]: length -45 bins, want 1..58254"},
		{"frame length overflow", repl(`{"bins":45,`, `{"bins":1e30,`), "cannot unmarshal number 1e30"},
		{"bin rate zero", repl(`"bin_rate_hz":991.8204361111111`, `"bin_rate_hz":0`), "bin_rate_hz = 0 is not a positive finite rate"},
		{"bin rate negative", repl(`"bin_rate_hz":991.8204361111111`, `"bin_rate_hz":-1`), "bin_rate_hz = -1 is not a positive finite rate"},
		{"nominal rate negative", repl(`"nominal_rate_hz":2`, `"nominal_rate_hz":-2`), "cells[0] (cluster 0): nominal_rate_hz = -2 is not a finite rate >= 0"},
		{"bias overflow", repl(`"bias":-6`, `"bias":-1e999`), "cannot unmarshal number -1e999"},
		{"stim filter too long", repl(`"stim_filter":[[`, `"stim_filter":[[`+strings.Repeat("0,", 1000)), "stimulus filter of 1060 bins, want 1..944"},
		{"file too large", nil, "larger than 134217728 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, TruthFile)
			if tc.content == nil {
				f, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(MaxTruthBytes + 1); err != nil {
					t.Fatal(err)
				}
				f.Close()
			} else if err := os.WriteFile(path, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, lerr := LoadTruth(dir)
			_, oerr := OracleFromDir(dir)
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > maxAllocBytes {
				t.Errorf("loading allocated %d bytes, want at most %d", d, maxAllocBytes)
			}
			if tc.want == "" {
				if lerr != nil || oerr != nil {
					t.Fatalf("valid truth refused: %v; %v", lerr, oerr)
				}
				return
			}
			for _, err := range []error{lerr, oerr} {
				if err == nil {
					t.Fatal("hostile truth accepted")
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
					t.Errorf("error %q\nwant it to name %s and contain %q", err, path, tc.want)
				}
			}
		})
	}
}

// TestOracleTailTable checks the oracle's table of P(length >= x) against
// its definition on a distribution with gaps between lengths (tolerance
// 1e-15, rounding of a handful of additions).
func TestOracleTailTable(t *testing.T) {
	raw, _ := smallRecording(t)
	tr, _ := smallTruth(t)
	tr.FrameLengths = []FrameLength{{Bins: 50, Prob: 0.5}, {Bins: 45, Prob: 0.25}, {Bins: 83, Prob: 0.25}, {Bins: 60, Prob: 0}}
	o, err := NewOracle(raw, tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.tail) != 85 {
		t.Fatalf("tail table of %d entries, want 85", len(o.tail))
	}
	for x := range o.tail {
		want := 0.0
		for _, l := range tr.FrameLengths {
			if l.Bins >= x {
				want += l.Prob
			}
		}
		if d := o.tail[x] - want; d > 1e-15 || d < -1e-15 {
			t.Errorf("tail[%d] = %g, want %g", x, o.tail[x], want)
		}
	}
}

// FuzzDecodeTruth decodes fuzzed truth.json content (seeded with a valid
// truth and hostile size fields) and builds the oracle of whatever is
// accepted on a small synthetic recording whose cells are the truth's:
// neither may panic, and every allocation is bounded by the validated
// sizes. Oracles with small trees are also evaluated at the last bin.
func FuzzDecodeTruth(f *testing.F) {
	raw, _ := smallRecording(f)
	_, good := smallTruth(f)
	f.Add(good)
	js := string(good)
	for _, r := range [][2]string{
		{`{"bins":45,`, `{"bins":9223372036854775807,`},
		{`{"bins":45,`, `{"bins":58254,`},
		{`"bin_rate_hz":991.8204361111111`, `"bin_rate_hz":-1`},
		{`"nominal_rate_hz":2`, `"nominal_rate_hz":1e308`},
		{`"hist_filter":[-3,-1]`, `"hist_filter":null`},
		{`"cells":[`, `"cells":[{"cluster_id":0},`},
	} {
		f.Add([]byte(strings.Replace(js, r[0], r[1], 1)))
	}
	f.Add([]byte(`{"frame_lengths":[{"bins":1,"prob":1}],"bin_rate_hz":1,"cells":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := decodeTruth(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("decodeTruth accepted an invalid truth: %v", err)
		}
		r := *raw
		r.Cells = make([]rgc.CellInfo, len(tr.Cells))
		for i, c := range tr.Cells {
			r.Cells[i] = rgc.CellInfo{ClusterID: c.ClusterID, Spikes: []int64{}}
		}
		o, err := NewOracle(&r, tr)
		if err != nil || o.NumCells() == 0 {
			return
		}
		if nodes := math.Pow(float64(len(o.lengths)*numPatterns), float64(o.maxNew)); nodes > 1e4 {
			// A tree of up to maxTreeNodes futures is valid but takes
			// seconds per window: too slow to evaluate while fuzzing.
			return
		}
		probs := make([]float64, rgc.NumClasses)
		_ = o.Probs(0, o.fr.end()-1, nil, probs)
	})
}
