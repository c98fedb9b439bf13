package rgc

import (
	"fmt"
	"io"
	"math"
)

// Summary describes a recording: its time base, cells, spikes, splits and
// stimulus frames (what `trainer inspect` prints; its JSON form is the
// command's --json output).
type Summary struct {
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
	RateHz           MinMeanMax        `json:"rate_hz"`
	QualityRateHz    MinMeanMax        `json:"quality_rate_hz"`
	Stimulus         StimulusSummary   `json:"stimulus"`
	Splits           map[string][2]int `json:"splits"`
	PerCell          []CellSummary     `json:"per_cell"`
}

// CellSummary is one cell of a Summary.
type CellSummary struct {
	ClusterID int     `json:"cluster_id"`
	Quality   bool    `json:"quality"`
	Spikes    int     `json:"spikes"`
	RateHz    float64 `json:"rate_hz"`
}

// StimulusSummary describes the stimulus frames of a Summary.
type StimulusSummary struct {
	Name       string             `json:"name"`
	Frames     int                `json:"frames"`
	Channels   []string           `json:"channels"`
	FrameMs    MinMeanMax         `json:"frame_ms"`
	OnFraction map[string]float64 `json:"on_fraction"`
}

// MinMeanMax is the smallest, mean and largest of a set of values (zeros
// for none).
type MinMeanMax struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// Summarise computes rec's Summary from its raw recording.
func Summarise(rec *Recording) *Summary {
	raw := rec.Raw
	dur := float64(raw.NumSamples) / raw.SampleRateHz
	s := &Summary{
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
		s.PerCell = append(s.PerCell, CellSummary{ClusterID: c.ClusterID, Quality: c.Quality, Spikes: len(c.Spikes), RateHz: rate})
		s.Spikes += len(c.Spikes)
		all = append(all, rate)
		if c.Quality {
			s.QualityCells++
			s.QualitySpikes += len(c.Spikes)
			qual = append(qual, rate)
		}
	}
	s.RateHz = MinMeanMaxOf(all)
	s.QualityRateHz = MinMeanMaxOf(qual)
	for _, sp := range []Split{Train, Val, Test} {
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
	st.FrameMs = MinMeanMaxOf(lens)
	st.OnFraction = map[string]float64{}
	for c := 0; c < StimChannels; c++ {
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

// MinMeanMaxOf returns the MinMeanMax of v.
func MinMeanMaxOf(v []float64) MinMeanMax {
	if len(v) == 0 {
		return MinMeanMax{}
	}
	r := MinMeanMax{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		r.Min = math.Min(r.Min, x)
		r.Max = math.Max(r.Max, x)
		r.Mean += x
	}
	r.Mean /= float64(len(v))
	return r
}

// WriteText writes the summary for a reader: one line per property, then a
// table of the cells.
func (s *Summary) WriteText(w io.Writer) {
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
	for i, p := range st.Channels {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
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
