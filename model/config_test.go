package model

import (
	"testing"

	"rgcpred/rgc"
)

func TestConfigPresetAndShape(t *testing.T) {
	custom, err := NewConfig(StemGPTA, HeadCat, CNNPaper, 3)
	if err != nil {
		t.Fatal(err)
	}
	custom.StemCh = 12
	for _, tc := range []struct {
		name       string
		cfg        func() (Config, error)
		wantPreset string
		wantName   string
	}{
		{"paper", func() (Config, error) { return NewConfig(StemGPTA, HeadCat, CNNPaper, 3) }, CNNPaper, "gpt-a-cat"},
		{"cpu", func() (Config, error) { return NewConfig(StemGPTB, HeadLogMix, CNNCPU, 3) }, CNNCPU, "gpt-b-logmix-cpu"},
		{"parsed cpu", func() (Config, error) { return ParseConfigName("gpt-a-cat-cpu", 3) }, CNNCPU, "gpt-a-cat-cpu"},
		{"custom sizes", func() (Config, error) { return custom, nil }, "custom", "gpt-a-cat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.cfg()
			if err != nil {
				t.Fatal(err)
			}
			if got := c.CNNPreset(); got != tc.wantPreset {
				t.Errorf("CNNPreset = %q, want %q", got, tc.wantPreset)
			}
			if got := c.Name(); got != tc.wantName {
				t.Errorf("Name = %q, want %q", got, tc.wantName)
			}
			if c.InRows != rgc.InputRows || c.InBins != rgc.WindowBins || c.Classes != rgc.NumClasses {
				t.Errorf("shape %dx%d, %d classes; want rgc's", c.InRows, c.InBins, c.Classes)
			}
		})
	}
	bad, _ := NewConfig(StemGPTA, HeadCat, CNNPaper, 3)
	bad.InBins = rgc.WindowBins / 2
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepted a window of half the bins")
	}
}
