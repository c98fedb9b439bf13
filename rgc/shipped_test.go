package rgc

import (
	"math"
	"testing"
)

// shippedDir is the real recording that ships with the project.
const shippedDir = "../data/chicken-17-08-21"

func TestShippedRecording(t *testing.T) {
	rec, err := Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	raw := rec.Raw
	if got := len(raw.Cells); got != 154 {
		t.Errorf("%d cells, want 154", got)
	}
	if got := len(rec.QualityClusterIDs()); got != 60 {
		t.Errorf("%d quality cells, want 60", got)
	}
	spikes := 0
	for _, c := range raw.Cells {
		spikes += len(c.Spikes)
	}
	if spikes != 194460 {
		t.Errorf("%d spikes, want 194460", spikes)
	}
	if math.Abs(rec.BinRateHz()-991.82) > 0.005 {
		t.Errorf("bin rate %.4f Hz, want 991.82", rec.BinRateHz())
	}
	if want := int(raw.NumSamples / 18); rec.Bins != want {
		t.Errorf("%d bins, want %d", rec.Bins, want)
	}
	t.Logf("bins %d, frames %d, first trigger %d, last %d", rec.Bins, len(raw.Pattern), raw.Triggers[0], raw.Triggers[len(raw.Triggers)-1])
}
