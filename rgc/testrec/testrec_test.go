package testrec

import (
	"testing"

	"rgcpred/rgc"
)

// TestPrefix checks the cut on a hand-made recording: stimulus lengths,
// spikes strictly before the cut, cell identity and quality kept.
func TestPrefix(t *testing.T) {
	r := &rgc.Recording{Name: "x", SampleRateHz: 20000, Bins: 10}
	for c := range r.Stimulus {
		r.Stimulus[c] = make([]float32, 10)
	}
	r.Cells = []rgc.Cell{
		{ClusterID: 7, Quality: true, SpikeBins: []int32{0, 3, 3, 5, 9}},
		{ClusterID: 9, SpikeBins: []int32{6, 8}},
	}
	p := Prefix(r, 5)
	if p.Bins != 5 || p.Name != "x" || p.SampleRateHz != 20000 {
		t.Fatalf("header %+v", p)
	}
	for c := range p.Stimulus {
		if len(p.Stimulus[c]) != 5 {
			t.Fatalf("stimulus %d has %d bins, want 5", c, len(p.Stimulus[c]))
		}
	}
	if len(p.Cells) != 2 || p.Cells[0].ClusterID != 7 || !p.Cells[0].Quality || p.Cells[1].ClusterID != 9 || p.Cells[1].Quality {
		t.Fatalf("cells %+v", p.Cells)
	}
	if got := p.Cells[0].SpikeBins; len(got) != 3 || got[0] != 0 || got[1] != 3 || got[2] != 3 {
		t.Fatalf("cell 7 spikes %v, want [0 3 3]", got)
	}
	if n := len(p.Cells[1].SpikeBins); n != 0 {
		t.Fatalf("cell 9 has %d spikes, want 0", n)
	}
	if len(r.Cells[0].SpikeBins) != 5 {
		t.Fatal("Prefix modified its input")
	}
}
