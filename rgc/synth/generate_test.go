package synth

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"rgcpred/rgc"
)

func TestWriteRoundTripAndDeterminism(t *testing.T) {
	cfg := Config{Cells: 3, Minutes: 1, Seed: 77}
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		raw, tr, err := Generate(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Write(dir); err != nil {
			t.Fatal(err)
		}
		if err := tr.Save(dir); err != nil {
			t.Fatal(err)
		}
	}
	// Same seed: byte-identical files.
	for _, name := range []string{rgc.FileJSON, rgc.FilePattern, rgc.FileTriggers, rgc.FileSamples, rgc.FileOffsets, TruthFile} {
		a, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
	}
	raw, tr, err := Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rgc.Load(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.Raw, raw) {
		t.Error("the recording read back differs from the one generated")
	}
	tr2, err := LoadTruth(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tr, tr2) {
		t.Error("truth.json read back differs from the truth generated")
	}
	wantBins := int(math.Ceil(cfg.Minutes * 60 * rgc.BinRateHz))
	if rec.Bins < wantBins || rec.Bins > wantBins+100 {
		t.Errorf("%d bins, want %d plus at most one frame", rec.Bins, wantBins)
	}
	for i, c := range rec.Cells {
		if !c.Quality || c.ClusterID != i {
			t.Errorf("cell %d: cluster %d quality %v, want cluster %d quality true", i, c.ClusterID, c.Quality, i)
		}
		for k := 1; k < len(c.SpikeBins); k++ {
			if c.SpikeBins[k] == c.SpikeBins[k-1] {
				t.Fatalf("cell %d: two spikes in bin %d", i, c.SpikeBins[k])
			}
		}
	}
	other, _, err := Generate(context.Background(), Config{Cells: 3, Minutes: 1, Seed: 78})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(other.Pattern, raw.Pattern) || reflect.DeepEqual(other.Cells[0].Spikes, raw.Cells[0].Spikes) {
		t.Error("a different seed gave the same stimulus or spikes")
	}
}

func TestStimulusLikeTheRealOne(t *testing.T) {
	dist := DefaultFrameLengths()
	f := drawFrames(newRand(4, streamStimulus), dist, 20*60*992)
	allowed := map[int]float64{}
	mean := 0.0
	for _, d := range dist {
		allowed[d.Bins] = d.Prob
		mean += d.Prob * float64(d.Bins)
	}
	counts := map[int]int{}
	on := [rgc.StimChannels]int{}
	for i := range f.pat {
		l := f.start[i+1] - f.start[i]
		if allowed[l] == 0 {
			t.Fatalf("frame %d lasts %d bins, not a length of the distribution", i, l)
		}
		counts[l]++
		for c := range on {
			on[c] += int(f.pat[i] >> c & 1)
		}
	}
	n := len(f.pat)
	got := float64(f.end()) / float64(n)
	// Real recording: 892.9 sensor samples per frame = 49.6 bins.
	if math.Abs(got-mean) > 0.1 || math.Abs(mean*rgc.Decimation-893) > 5 {
		t.Errorf("mean frame %.2f bins (distribution %.2f = %.0f samples), want about 893 samples", got, mean, mean*rgc.Decimation)
	}
	for l, p := range allowed {
		exp := p * float64(n)
		if sd := math.Sqrt(exp * (1 - p)); math.Abs(float64(counts[l])-exp) > 5*sd+1 {
			t.Errorf("length %d: %d frames, expected %.0f +- %.0f", l, counts[l], exp, sd)
		}
	}
	for c, k := range on {
		if sd := math.Sqrt(float64(n) / 4); math.Abs(float64(k)-float64(n)/2) > 5*sd {
			t.Errorf("LED %d on in %d of %d frames, want half", c, k, n)
		}
	}
}

// TestBayesNLLBeatsZeroInput generates a fresh population and checks that
// the oracle's NLL on the test split is below the zero-input model's (class
// frequencies of the training split) by at least 0.02 nats, that its NLL is
// its claimed entropy within 4 standard errors, and that BayesNLL agrees with
// scoring the windows one by one.
func TestBayesNLLBeatsZeroInput(t *testing.T) {
	_, _, rec, o := generate(t, Config{Cells: 2, Minutes: 3, Seed: 4242})
	cells := []int{0, 1}
	res, err := BayesNLL(context.Background(), o, rec, rgc.Test, cells)
	if err != nil {
		t.Fatal(err)
	}
	zero := FixedNLL(rec, rgc.Test, cells, ClassFrequencies(rec, rgc.Train, cells))
	t.Logf("test split, %d windows: oracle NLL %.4f (entropy %.4f, gap standard error %.4f), zero-input NLL %.4f", res.Windows, res.NLL, res.Entropy, res.GapSE, zero.NLL)
	if res.NLL > zero.NLL-0.02 {
		t.Errorf("oracle NLL %.4f does not beat the zero-input NLL %.4f by 0.02", res.NLL, zero.NLL)
	}
	// Its NLL is the entropy it claims, within 4 batch-means standard errors.
	if res.GapSE <= 0 || math.Abs(res.NLL-res.Entropy) > 4*res.GapSE {
		t.Errorf("NLL %.4f vs entropy %.4f: gap more than 4 standard errors (%.4f)", res.NLL, res.Entropy, res.GapSE)
	}
	first, last, n := rec.WindowRange(rgc.Test)
	if res.Windows != n*len(cells) {
		t.Errorf("%d windows scored, want %d", res.Windows, n*len(cells))
	}
	// Cell 1 scored window by window.
	p := make([]float64, rgc.NumClasses)
	sum := 0.0
	sb := rec.Cells[1].SpikeBins
	for tt := first; tt <= last; tt++ {
		if err := o.Probs(1, tt, sb, p); err != nil {
			t.Fatal(err)
		}
		sum -= math.Log(p[rgc.Target(sb, tt)])
	}
	if direct := sum / float64(n); math.Abs(direct-res.PerCell[1]) > 1e-9 {
		t.Errorf("cell 1: NLL window by window %.12f, BayesNLL %.12f", direct, res.PerCell[1])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BayesNLL(ctx, o, rec, rgc.Test, cells); err == nil {
		t.Error("BayesNLL ignored a cancelled context")
	}
}
