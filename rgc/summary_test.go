package rgc

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestSummarise(t *testing.T) {
	rec, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarise(rec)
	if s.Cells != 154 || s.QualityCells != 60 || s.Spikes != 194460 || s.Bins != 803606 {
		t.Errorf("cells %d quality %d spikes %d bins %d, want 154 60 194460 803606", s.Cells, s.QualityCells, s.Spikes, s.Bins)
	}
	if math.Abs(s.BinRateHz-991.82) > 0.005 {
		t.Errorf("bin rate %.4f, want 991.82", s.BinRateHz)
	}
	if s.Stimulus.Frames != 16200 || len(s.PerCell) != 154 {
		t.Errorf("frames %d, per-cell %d", s.Stimulus.Frames, len(s.PerCell))
	}
	// Frames vary from 802 to 1488 sensor samples (data/README.md).
	if math.Abs(s.Stimulus.FrameMs.Min-802/SensorRateHz*1000) > 1e-9 ||
		math.Abs(s.Stimulus.FrameMs.Max-1488/SensorRateHz*1000) > 1e-9 {
		t.Errorf("frame ms %+v", s.Stimulus.FrameMs)
	}
	for led, f := range s.Stimulus.OnFraction {
		if f < 0.45 || f > 0.55 {
			t.Errorf("LED %s on %.3f of frames, want about half (noise stimulus)", led, f)
		}
	}
	var buf bytes.Buffer
	s.WriteText(&buf)
	for _, want := range []string{
		"Chicken_17_08_21_Phase_00", "154 total, 60 quality", "194460 total", "991.82 Hz", "16200 frames",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}
