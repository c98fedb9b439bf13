package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"rgcpred/base/cli"
	"rgcpred/rgc"
)

// inspectCellJSON is one cell in inspect's JSON output.
type inspectCellJSON struct {
	ClusterID int     `json:"cluster_id"`
	Quality   bool    `json:"quality"`
	Spikes    int     `json:"spikes"`
	RateHz    float64 `json:"rate_hz"`
}

// rangeJSON is a min/mean/max summary.
type rangeJSON struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// inspectJSON is inspect's JSON output.
type inspectJSON struct {
	Name             string            `json:"name"`
	Species          string            `json:"species"`
	DurationS        float64           `json:"duration_s"`
	NumSensorSamples int64             `json:"num_sensor_samples"`
	SampleRateHz     float64           `json:"sample_rate_hz"`
	Bins             int               `json:"bins"`
	BinRateHz        float64           `json:"bin_rate_hz"`
	Cells            int               `json:"cells"`
	QualityCells     int               `json:"quality_cells"`
	Spikes           int               `json:"spikes"`
	QualitySpikes    int               `json:"quality_spikes"`
	RateHz           rangeJSON         `json:"rate_hz"`
	QualityRateHz    rangeJSON         `json:"quality_rate_hz"`
	Stimulus         inspectStimJSON   `json:"stimulus"`
	Splits           map[string][2]int `json:"splits"`
	PerCell          []inspectCellJSON `json:"per_cell"`
}

// inspectStimJSON summarises the stimulus frames.
type inspectStimJSON struct {
	Name       string             `json:"name"`
	Frames     int                `json:"frames"`
	Channels   []string           `json:"channels"`
	FrameMs    rangeJSON          `json:"frame_ms"`
	OnFraction map[string]float64 `json:"on_fraction"`
}

// runInspect implements `trainer inspect DIR [--json]`.
func runInspect(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: trainer inspect DIR [--json]\n\nSummarise the recording in DIR (recording.json + .npy files).")
		fs.PrintDefaults()
	}
	// Accept flags before or after DIR.
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
		} else {
			pos = append(pos, a)
		}
	}
	if err := cli.Parse(fs, flags); err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return errors.New("want exactly one recording directory")
	}
	rec, err := rgc.Load(pos[0])
	if err != nil {
		return err
	}
	sum := summarise(rec)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	printSummary(os.Stdout, sum)
	return nil
}

// summarise computes inspect's summary of a recording.
func summarise(rec *rgc.Recording) *inspectJSON {
	raw := rec.Raw
	dur := float64(raw.NumSamples) / raw.SampleRateHz
	s := &inspectJSON{
		Name:             raw.Name,
		Species:          raw.Species,
		DurationS:        dur,
		NumSensorSamples: raw.NumSamples,
		SampleRateHz:     raw.SampleRateHz,
		Bins:             rec.Bins,
		BinRateHz:        rec.BinRateHz(),
		Cells:            len(raw.Cells),
		Splits:           map[string][2]int{},
	}
	var all, qual []float64
	for _, c := range raw.Cells {
		rate := float64(len(c.Spikes)) / dur
		s.PerCell = append(s.PerCell, inspectCellJSON{ClusterID: c.ClusterID, Quality: c.Quality, Spikes: len(c.Spikes), RateHz: rate})
		s.Spikes += len(c.Spikes)
		all = append(all, rate)
		if c.Quality {
			s.QualityCells++
			s.QualitySpikes += len(c.Spikes)
			qual = append(qual, rate)
		}
	}
	s.RateHz = summaryRange(all)
	s.QualityRateHz = summaryRange(qual)
	for _, sp := range []rgc.Split{rgc.Train, rgc.Val, rgc.Test} {
		from, to := rec.SplitRange(sp)
		s.Splits[sp.String()] = [2]int{from, to}
	}
	st := &s.Stimulus
	st.Name = raw.StimulusName
	st.Frames = len(raw.Pattern)
	st.Channels = raw.Channels
	lens := make([]float64, st.Frames)
	for f := range lens {
		lens[f] = float64(raw.Triggers[f+1]-raw.Triggers[f]) / raw.SampleRateHz * 1000
	}
	st.FrameMs = summaryRange(lens)
	st.OnFraction = map[string]float64{}
	for c := 0; c < rgc.StimChannels; c++ {
		on := 0
		for _, p := range raw.Pattern {
			if p[c] != 0 {
				on++
			}
		}
		frac := 0.0
		if st.Frames > 0 {
			frac = float64(on) / float64(st.Frames)
		}
		st.OnFraction[raw.Channels[c]] = frac
	}
	return s
}

// summaryRange returns min, mean and max of v (zeros when empty).
func summaryRange(v []float64) rangeJSON {
	if len(v) == 0 {
		return rangeJSON{}
	}
	r := rangeJSON{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		r.Min = math.Min(r.Min, x)
		r.Max = math.Max(r.Max, x)
		r.Mean += x
	}
	r.Mean /= float64(len(v))
	return r
}

// printSummary writes the human-readable summary.
func printSummary(w io.Writer, s *inspectJSON) {
	fmt.Fprintf(w, "recording      %s (%s)\n", s.Name, s.Species)
	fmt.Fprintf(w, "duration       %.1f s (%d sensor samples at %.5f Hz)\n", s.DurationS, s.NumSensorSamples, s.SampleRateHz)
	fmt.Fprintf(w, "bins           %d at %.2f Hz (%.4f ms per bin)\n", s.Bins, s.BinRateHz, 1000/s.BinRateHz)
	fmt.Fprintf(w, "splits         train %v, val %v, test %v (bins [from, to))\n", s.Splits["train"], s.Splits["val"], s.Splits["test"])
	fmt.Fprintf(w, "cells          %d total, %d quality\n", s.Cells, s.QualityCells)
	fmt.Fprintf(w, "spikes         %d total, %d in quality cells\n", s.Spikes, s.QualitySpikes)
	fmt.Fprintf(w, "rates (Hz)     all cells %.2f .. %.2f (mean %.2f); quality cells %.2f .. %.2f (mean %.2f)\n",
		s.RateHz.Min, s.RateHz.Max, s.RateHz.Mean, s.QualityRateHz.Min, s.QualityRateHz.Max, s.QualityRateHz.Mean)
	st := s.Stimulus
	fmt.Fprintf(w, "stimulus       %s: %d frames, frame length %.2f / %.2f / %.2f ms (min / mean / max)\n",
		st.Name, st.Frames, st.FrameMs.Min, st.FrameMs.Mean, st.FrameMs.Max)
	fmt.Fprintf(w, "LED on         ")
	first := true
	for _, p := range st.Channels {
		if !first {
			fmt.Fprint(w, ", ")
		}
		first = false
		fmt.Fprintf(w, "%s %.3f", p, st.OnFraction[p])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\ncluster  quality  spikes  rate (Hz)")
	for _, c := range s.PerCell {
		q := ""
		if c.Quality {
			q = "yes"
		}
		fmt.Fprintf(w, "%7d  %-7s  %6d  %9.3f\n", c.ClusterID, q, c.Spikes, c.RateHz)
	}
}
