package rollout

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rgcpred/rgc"
)

// dist returns an 81-class distribution with mass pSpike spread evenly on
// classes lo..hi-1 and the rest on no spike.
func dist(pSpike float64, lo, hi int) []float32 {
	p := make([]float32, rgc.NumClasses)
	for k := lo; k < hi; k++ {
		p[k] = float32(pSpike / float64(hi-lo))
	}
	p[rgc.NoSpikeClass] = float32(1 - pSpike)
	return p
}

func TestPolicyChoose(t *testing.T) {
	th := &Threshold{Thresholds: map[int]float64{1: 0.2, 2: 0.9}}
	for _, tc := range []struct {
		name   string
		policy Policy
		cell   int
		probs  []float32
		want   int
	}{
		{"median: likely spike", Median{}, 1, dist(0.8, 10, 20), 16},
		{"median: unlikely spike", Median{}, 1, dist(0.3, 10, 20), rgc.NoSpikeClass},
		{"threshold: above the cell's threshold", th, 1, dist(0.3, 10, 19), 14},
		{"threshold: below the cell's threshold", th, 2, dist(0.8, 10, 20), rgc.NoSpikeClass},
		{"threshold: a cell without threshold uses 0.5", th, 3, dist(0.6, 0, 2), 0},
		{"threshold: certain spike", th, 1, dist(1, 40, 41), 40},
		{"threshold: certain silence", th, 1, dist(0, 0, 1), rgc.NoSpikeClass},
	} {
		if got := tc.policy.Choose(tc.cell, 5000, tc.probs); got != tc.want {
			t.Errorf("%s: class %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestSampleFollowsDistribution: over many windows the sampled classes
// have the model's frequencies (within 4 standard errors), and a window's
// draw depends only on (seed, cell, end).
func TestSampleFollowsDistribution(t *testing.T) {
	p := dist(0.3, 0, 3) // 0.1, 0.1, 0.1, ..., 0.7 on no spike
	s := Sample{Seed: 3}
	counts := make([]int, rgc.NumClasses)
	const n = 200_000
	for i := range n {
		k := s.Choose(i%17, i, p)
		if k2 := s.Choose(i%17, i, p); k2 != k {
			t.Fatalf("window %d drew %d then %d", i, k, k2)
		}
		counts[k]++
	}
	for k, c := range counts {
		want := float64(p[k]) * n
		if se := math.Sqrt(float64(p[k]) * (1 - float64(p[k])) * n); math.Abs(float64(c)-want) > 4*se+1e-9 {
			t.Errorf("class %d drawn %d times, want %.0f +- %.0f", k, c, want, 4*se)
		}
	}
	other := Sample{Seed: 4}
	same := 0
	for i := range 1000 {
		if other.Choose(1, i, p) == s.Choose(1, i, p) {
			same++
		}
	}
	if same > 700 { // two independent draws agree with probability 0.52
		t.Errorf("seeds 3 and 4 agree on %d of 1000 windows: the seed does not matter", same)
	}
}

func TestParsePolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"cells":[{"id":7,"threshold":0.25},{"id":9,"threshold":1}]}`)
	for _, tc := range []struct {
		spec, want, err string
	}{
		{"", "median", ""},
		{"median", "median", ""},
		{"sample", "sample:1", ""},
		{"sample:42", "sample:42", ""},
		{"threshold:" + good, "threshold:" + good, ""},
		{"median:3", "", "no argument"},
		{"sample:x", "", "seed"},
		{"threshold", "", "needs a file"},
		{"threshold:" + filepath.Join(dir, "missing.json"), "", "no such file"},
		{"threshold:" + write("empty.json", `{"cells":[]}`), "", "no cells"},
		{"threshold:" + write("dup.json", `{"cells":[{"id":1,"threshold":0.5},{"id":1,"threshold":0.5}]}`), "", "twice"},
		{"threshold:" + write("zero.json", `{"cells":[{"id":1,"threshold":0}]}`), "", "outside"},
		{"threshold:" + write("big.json", `{"cells":[{"id":1,"threshold":1.5}]}`), "", "outside"},
		{"threshold:" + write("junk.json", `{"cells":`), "", "unexpected end"},
		{"mean", "", "unknown policy"},
	} {
		p, err := ParsePolicy(tc.spec)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.spec, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.spec, err)
		case tc.err == "" && p.String() != tc.want:
			t.Errorf("%q: policy %s, want %s", tc.spec, p, tc.want)
		}
	}
	p, _ := ParsePolicy("threshold:" + good)
	if err := CheckPolicy(p, []int{7, 9}); err != nil {
		t.Error(err)
	}
	if err := CheckPolicy(p, []int{7, 8}); err == nil || !strings.Contains(err.Error(), "cell 8") {
		t.Errorf("missing cell 8: %v", err)
	}
}

// rampPredictor gives every window a spike probability that is a hash of
// (cell, end), uniform in [0, 1), spread over classes 0..19.
type rampPredictor struct{}

func (rampPredictor) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		copy(out[i*rgc.NumClasses:(i+1)*rgc.NumClasses], dist(uniform(9, uint64(b.Cells[i]), uint64(b.Ends[i])), 0, 20))
	}
	return nil
}

// TestFitThresholds: the fitted thresholds make each cell's rollout fire
// as often as the recording, for cells of different rates.
func TestFitThresholds(t *testing.T) {
	const bins = 40_000
	rec := testRecording(bins, every(bins, 100, 3), every(bins, 400, 7), every(bins, 1500, 11))
	cells, err := FitThresholds(context.Background(), rec, rampPredictor{}, FitOptions{Split: rgc.Train, Cells: []int{0, 1, 2}, Iterations: 14})
	if err != nil {
		t.Fatal(err)
	}
	prev := 0.0
	for _, c := range cells {
		// The count is a noisy function of the threshold: allow 10% plus
		// three Poisson standard errors.
		if r := float64(c.Recorded); c.Recorded < 15 || math.Abs(float64(c.Generated)-r) > 0.1*r+3*math.Sqrt(r) {
			t.Errorf("cell %d: threshold %.4f generates %d spikes, recorded %d", c.ID, c.Threshold, c.Generated, c.Recorded)
		}
		if c.Threshold <= prev {
			t.Errorf("cell %d: threshold %.4f not above the faster cell's %.4f", c.ID, c.Threshold, prev)
		}
		prev = c.Threshold
		if !c.Matched || c.Mismatch() != "" {
			t.Errorf("cell %d: %d of %d spikes not marked matched (%q)", c.ID, c.Generated, c.Recorded, c.Mismatch())
		}
	}
	b, _ := json.Marshal(ThresholdFile{Cells: cells})
	path := filepath.Join(t.TempDir(), "th.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	th, err := LoadThreshold(path)
	if err != nil || th.Thresholds[11] != cells[1].Threshold {
		t.Fatalf("reloaded %+v, %v", th, err)
	}
	t.Logf("%+v", cells)
}

// runawayPredictor is a bistable cell: a spike within the last 40 bins of
// the window's history makes the next one near certain (P(spike) 0.97);
// otherwise P(spike) is a hash of (cell, end) below 0.3. Above 0.97 its
// rollout is silent, below it fires in almost every bin once started.
type runawayPredictor struct{}

func (runawayPredictor) Predict(b *rgc.Batch, out []float32) error {
	for i := range b.Len() {
		row := b.Inputs[i*rgc.WindowLen+rgc.SpikeRow*rgc.WindowBins : i*rgc.WindowLen+(rgc.SpikeRow+1)*rgc.WindowBins]
		p := 0.3 * uniform(5, uint64(b.Cells[i]), uint64(b.Ends[i]))
		for _, v := range row[rgc.WindowBins-40:] {
			if v > 0 {
				p = 0.97
			}
		}
		copy(out[i*rgc.NumClasses:(i+1)*rgc.NumClasses], dist(p, 0, 1))
	}
	return nil
}

// TestFitThresholdsRunaway: a rollout that flips from silence to runaway
// firing matches no threshold; the fit narrows the jump to where it is,
// keeps the nearer count and says so.
func TestFitThresholdsRunaway(t *testing.T) {
	const bins = 12_000
	lo, _ := testRecording(bins).SplitRange(rgc.Train)
	// A spike in the last bins of the first window starts the runaway.
	runaway := append([]int32{int32(lo + rgc.WindowBins - 5)}, every(bins, 200, 3)...)
	rec := testRecording(bins, runaway)
	cells, err := FitThresholds(context.Background(), rec, runawayPredictor{}, FitOptions{Split: rgc.Train, Cells: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	c := cells[0]
	if c.Matched || c.Over == nil || c.Under == nil {
		t.Fatalf("runaway cell: %+v, want unmatched with both sides of the jump", c)
	}
	// The jump is at 1 - float32(0.03), 0.97 to 1e-8.
	if math.Abs(c.Over.Threshold-0.97) > 1e-6 || math.Abs(c.Under.Threshold-0.97) > 1e-6 || c.Under.Threshold <= c.Over.Threshold {
		t.Errorf("jump bracketed by t=%.9f (%d spikes) and t=%.9f (%d), want both within 1e-6 of 0.97",
			c.Over.Threshold, c.Over.Generated, c.Under.Threshold, c.Under.Generated)
	}
	if c.Generated != 0 || c.Under.Generated != 0 || c.Over.Generated < 10*c.Recorded {
		t.Errorf("nearest count %d (silent side %d, runaway side %d), want silence nearest %d recorded against a runaway", c.Generated, c.Under.Generated, c.Over.Generated, c.Recorded)
	}
	msg := c.Mismatch()
	if !strings.Contains(msg, "no threshold matches") || !strings.Contains(msg, "nearest 0 at t=0.97") {
		t.Errorf("mismatch %q", msg)
	}
	t.Log(msg)
}
