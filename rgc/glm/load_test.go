package glm

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"rgcpred/rgc/synth"
)

// shippedGLM is the fitted report that ships with the project.
const shippedGLM = "../../models/glm-chicken-17-08-21.json"

// shippedReport reads the shipped report, keeping its first cells cells.
func shippedReport(t testing.TB, cells int) *Report {
	t.Helper()
	data, err := os.ReadFile(shippedGLM)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	rep.Cells = rep.Cells[:cells]
	return &rep
}

// TestLoadTruthHostile writes GLM files whose size and count fields are
// huge, negative, non-finite or inconsistent with each other: LoadTruth must
// fail with an error naming the file and the field, allocating little (at
// most maxAllocBytes), never panicking.
func TestLoadTruthHostile(t *testing.T) {
	const maxAllocBytes = 64 << 20
	cases := []struct {
		name   string
		mutate func(r *Report)
		raw    string // used instead of the mutated report when set
		want   string
	}{
		{"valid", func(r *Report) {}, "", ""},
		{"stim last peak 1e308", func(r *Report) { r.Options.StimLastPeak = 1e308 }, "", "options.stim_bases = 9, stim_last_peak = 1e+308, stim_offset = 10: stimulus basis"},
		{"stim last peak 1e12", func(r *Report) { r.Options.StimLastPeak = 1e12 }, "", "stim_last_peak = 1e+12"},
		{"stim last peak long", func(r *Report) { r.Options.StimLastPeak = 2000 }, "", "span 7595 lags: they exceed the 1024-lag limit"},
		{"stim last peak negative", func(r *Report) { r.Options.StimLastPeak = -1 }, "", "want 0 <= first < last and offset > 0"},
		{"stim bases 1e9", func(r *Report) { r.Options.StimBases = 1e9 }, "", "options.stim_bases = 1000000000, stim_last_peak = 210, stim_offset = 10: stimulus basis: 1000000000 bumps, want 1..1024"},
		{"stim bases negative", func(r *Report) { r.Options.StimBases = -9 }, "", "basis: -9 bumps"},
		{"stim offset 1e308", func(r *Report) { r.Options.StimOffset = 1e308 }, "", "stim_offset = 1e+308"},
		{"hist bases max int", func(r *Report) { r.Options.HistBases = math.MaxInt }, "", fmt.Sprintf("options.hist_bases = %d", math.MaxInt)},
		{"hist last peak 1e300", func(r *Report) { r.Options.HistLastPeak = 1e300 }, "", "hist_last_peak = 1e+300"},
		{"min lag huge", func(r *Report) { r.Options.MinLag = math.MaxInt }, "", fmt.Sprintf("options.min_lag = %d, want 0..1023", math.MaxInt)},
		{"too many alphas", func(r *Report) { r.Options.Alphas = make([]float64, 2000) }, "", "options.alphas: 2000 L2 penalties, want at most 1000"},
		{"params mismatch", func(r *Report) { r.Params = math.MaxInt }, "", fmt.Sprintf("params = %d, the options' bases give 47", math.MaxInt)},
		{"stim bins mismatch", func(r *Report) { r.StimBins = 1e9 }, "", "stim_bins = 1000000000 and hist_bins = 351, the options' bases give 503 and 351"},
		{"split negative", func(r *Report) { r.Splits[0][0] = -5 }, "", "splits[0] = [-5 562524]"},
		{"splits overlap", func(r *Report) { r.Splits[1][0] = 10 }, "", "splits[1] = [10 723245]"},
		{"train spikes negative", func(r *Report) { r.Cells[1].TrainSpikeBins = -1 }, "", "cells[1] (cluster 21): train_spike_bins = -1, want 0..562524"},
		{"train spikes over split", func(r *Report) { r.Cells[0].TrainSpikeBins = 1e9 }, "", "train_spike_bins = 1000000000"},
		{"theta short", func(r *Report) { r.Cells[1].Theta = r.Cells[1].Theta[:3] }, "", "cells[1] (cluster 21): theta has 3 weights, the options' bases need 47"},
		{"theta overflows the filter", func(r *Report) { copy(r.Cells[0].Theta[1:], []float64{1.7e308, 1.7e308, 1.7e308, 1.7e308}) }, "", "stimulus filter channel 0 lag"},
		{"val nll by alpha", func(r *Report) { r.Cells[0].ValNLLByAlpha = nil }, "", "val_nll_by_alpha has 0 entries for 4 options.alphas"},
		{"alpha negative", func(r *Report) { r.Cells[0].Alpha = -1 }, "", "alpha = -1"},
		{"iterations negative", func(r *Report) { r.Cells[0].Iterations = -1 }, "", "iterations = -1"},
		{"seconds negative", func(r *Report) { r.Seconds = -1 }, "", "seconds = -1"},
		{"frame length 1e15", func(r *Report) { r.FrameLengths[0].Bins = 1e15 }, "", "frame_lengths[0]: length 1000000000000000 bins, want 1..58254"},
		{"frame length negative", func(r *Report) { r.FrameLengths[0].Bins = -44 }, "", "frame_lengths[0]: length -44 bins"},
		{"number overflow", nil, `{"options": {"stim_last_peak": 1e999}}`, "cannot unmarshal number 1e999"},
		{"truth frame length huge", nil, `{"bin_rate_hz": 991.82, "frame_lengths": [{"bins": 9223372036854775807, "prob": 1}], "cells": []}`, "frame_lengths[0]: length 9223372036854775807 bins"},
		{"file too large", nil, "sparse", "larger than 134217728 bytes"},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			switch {
			case tc.raw == "sparse":
				f, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(synth.MaxTruthBytes + 1); err != nil {
					t.Fatal(err)
				}
				f.Close()
			case tc.raw != "":
				if err := os.WriteFile(path, []byte(tc.raw), 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				rep := shippedReport(t, 2)
				tc.mutate(rep)
				data, err := json.Marshal(rep)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			tr, err := LoadTruth(path)
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > maxAllocBytes {
				t.Errorf("loading allocated %d bytes, want at most %d", d, maxAllocBytes)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(tr.Cells) != 2 || len(tr.Cells[0].StimFilter[0]) != 503 || len(tr.Cells[0].HistFilter) != 351 {
					t.Errorf("truth of %d cells, filters of %d and %d bins; want 2 cells, 503 and 351", len(tr.Cells), len(tr.Cells[0].StimFilter[0]), len(tr.Cells[0].HistFilter))
				}
				return
			}
			if err == nil {
				t.Fatal("LoadTruth accepted the file")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, path) {
				t.Errorf("error %q\nwant it to name %s and contain %q", msg, path, tc.want)
			}
		})
	}
}

// TestBasisLenBounds checks that BasisLen bounds the basis NewBasis would
// allocate and agrees with it on valid arguments.
func TestBasisLenBounds(t *testing.T) {
	tests := []struct {
		name                string
		n, start            int
		first, last, offset float64
		wantLen             int // 0: an error
	}{
		{"default stimulus", 9, 36, 0, 210, 10, 503},
		{"default history", 10, 1, 0, 120, 1, 352},
		{"one bump", 1, 0, 5, 5, 1, 44},
		{"at the limit", 1, 1000, 0, 0, 1, 1007},
		{"too many bumps", MaxBasisLen + 1, 0, 0, 10, 1, 0},
		{"start past the limit", 3, MaxBasisLen + 1, 0, 10, 1, 0},
		{"infinite last peak", 3, 0, 0, 1e308, 1, 0},
		{"NaN first peak", 3, 0, math.NaN(), 10, 1, 0},
		{"infinite offset", 3, 0, 0, 10, math.Inf(1), 0},
		{"span over the limit", 3, 600, 0, 300, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BasisLen(tc.n, tc.start, tc.first, tc.last, tc.offset)
			b, berr := NewBasis(tc.n, tc.start, tc.first, tc.last, tc.offset)
			if tc.wantLen == 0 {
				if err == nil || berr == nil {
					t.Fatalf("BasisLen = %d, %v and NewBasis error %v: want errors", got, err, berr)
				}
				return
			}
			if err != nil || berr != nil {
				t.Fatalf("errors %v, %v", err, berr)
			}
			if got != tc.wantLen || b.Len != got {
				t.Errorf("BasisLen = %d, NewBasis length %d; want %d", got, b.Len, tc.wantLen)
			}
		})
	}
}

// FuzzDecodeGLM decodes fuzzed GLM files (seeded with a two-cell shipped
// report, a small truth and hostile size fields): decoding must never
// panic, and whatever it accepts must be a valid truth whose filters fit
// the model's window.
func FuzzDecodeGLM(f *testing.F) {
	rep := shippedReport(f, 2)
	good, err := json.Marshal(rep)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	tr, err := rep.Truth()
	if err != nil {
		f.Fatal(err)
	}
	tr.Cells = tr.Cells[:1]
	tj, err := json.Marshal(tr)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tj)
	js := string(good)
	for _, r := range [][2]string{
		{`"stim_last_peak":210`, `"stim_last_peak":1e308`},
		{`"stim_bases":9`, `"stim_bases":1000000000`},
		{`"hist_bases":10`, `"hist_bases":-1`},
		{`"stim_offset":10`, `"stim_offset":1e-320`},
		{`"params":47`, `"params":48`},
		{`"bins":44`, `"bins":9223372036854775807`},
	} {
		if !strings.Contains(js, r[0]) {
			f.Fatalf("%q not in the report JSON", r[0])
		}
		f.Add([]byte(strings.Replace(js, r[0], r[1], 1)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := decodeTruth("fuzz.json", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted an invalid truth: %v", err)
		}
	})
}
