package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"rgcpred/rgc"
)

// generate makes a small synthetic recording for tests.
func generate(t testing.TB, cfg Config) (*rgc.Raw, *Truth, *rgc.Recording, *Oracle) {
	t.Helper()
	raw, tr, err := Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := raw.Bin()
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOracle(raw, tr)
	if err != nil {
		t.Fatal(err)
	}
	return raw, tr, rec, o
}

// mcSim draws futures of the stimulus after bin t (the current frame's
// length given that it has lasted up to t, then fresh frames) and simulates
// the cell until its first spike after t, by the plain definitions of the
// model (the filter summed frame by frame, the history spike by spike),
// independently of the oracle's tree.
type mcSim struct {
	p      *CellParams
	dist   []FrameLength
	t      int
	known  int     // frames starting up to this bin are known
	spikes []int32 // spikes the history filter reaches
	cum    [rgc.StimChannels][]float64
	base   []float64 // bias + drive of frames that ended by t, per horizon bin
	cur    frame     // the frame covering t (its end is drawn)
	fs     []frame   // scratch: the current and future frames
}

type frame struct {
	a, b int
	pat  uint8
}

func newMCSim(p *CellParams, f *frames, dist []FrameLength, t, known int, spikes []int32) *mcSim {
	m := &mcSim{p: p, dist: dist, t: t, known: known, spikes: spikes, base: make([]float64, rgc.Horizon)}
	for c := range m.cum {
		s := 0.0
		for _, k := range p.StimFilter[c] {
			s += k
			m.cum[c] = append(m.cum[c], s)
		}
	}
	ci := f.frameAt(known)
	m.cur = frame{f.start[ci], -1, f.pat[ci]}
	for i := range m.base {
		u := t + 1 + i
		m.base[i] = p.Bias
		for j := 0; j < ci; j++ {
			m.base[i] += m.frameDrive(frame{f.start[j], f.start[j+1], f.pat[j]}, u)
		}
	}
	return m
}

// frameDrive is the drive at bin u of one frame: sum_c level_c times the
// filter summed over the lags u-b+1..u-a.
func (m *mcSim) frameDrive(fr frame, u int) float64 {
	lk := len(m.p.StimFilter[0])
	C := func(c, n int) float64 {
		if n < 0 {
			return 0
		}
		return m.cum[c][min(n, lk-1)]
	}
	d := 0.0
	for c := 0; c < rgc.StimChannels; c++ {
		d += level(fr.pat, c) * (C(c, u-fr.a) - C(c, u-fr.b))
	}
	return d
}

// drawLength draws a frame length of at least minLen bins.
func (m *mcSim) drawLength(r *rand.Rand, minLen int) int {
	total := 0.0
	for _, d := range m.dist {
		if d.Bins >= minLen {
			total += d.Prob
		}
	}
	u := r.Float64() * total
	last := 0
	for _, d := range m.dist {
		if d.Bins < minLen || d.Prob == 0 {
			continue
		}
		last = d.Bins
		if u < d.Prob {
			return d.Bins
		}
		u -= d.Prob
	}
	return last
}

// draw simulates one future and returns its class.
func (m *mcSim) draw(r *rand.Rand) int {
	t := m.t
	cur := m.cur
	cur.b = cur.a + m.drawLength(r, m.known-cur.a+1)
	m.fs = append(m.fs[:0], cur)
	for m.fs[len(m.fs)-1].b <= t+rgc.Horizon {
		a := m.fs[len(m.fs)-1].b
		m.fs = append(m.fs, frame{a, a + m.drawLength(r, 0), uint8(r.IntN(numPatterns))})
	}
	for i, base := range m.base {
		u := t + 1 + i
		eta := base
		for _, fr := range m.fs {
			if fr.a <= u {
				eta += m.frameDrive(fr, u)
			}
		}
		for _, q := range m.spikes {
			if lag := u - int(q); lag >= 1 && lag <= len(m.p.HistFilter) {
				eta += m.p.HistFilter[lag-1]
			}
		}
		if r.Float64() < 1-math.Exp(-math.Exp(eta)) {
			return i
		}
	}
	return rgc.NoSpikeClass
}

// chiSquare compares observed class counts with n times the probabilities p,
// pooling consecutive classes until each pool expects at least 5. It returns
// the statistic and its degrees of freedom.
func chiSquare(obs []int, p []float64, n int) (stat float64, df int) {
	pools := 0
	o, e := 0.0, 0.0
	flush := func() {
		stat += (o - e) * (o - e) / e
		pools++
		o, e = 0, 0
	}
	for k := range p {
		o += float64(obs[k])
		e += p[k] * float64(n)
		if e >= 5 {
			flush()
		}
	}
	if e > 0 || o > 0 {
		if e == 0 {
			return math.Inf(1), pools
		}
		flush()
	}
	return stat, pools - 1
}

func TestOracleMatchesMonteCarlo(t *testing.T) {
	const (
		draws = 20000
		alpha = 1e-4 // per-window false-alarm rate of the chi-square test
	)
	short := []FrameLength{{28, 0.5}, {33, 0.3}, {40, 0.2}}
	cases := []struct {
		name  string
		cfg   Config
		cell  int
		ahead int // look-ahead of the oracle
	}{
		// Drawn cells with default frames (one new frame can matter), their
		// rate raised about 12-fold so that 20,000 draws fill many classes.
		{"drawn cell 0, rate raised", Config{Cells: 2, Minutes: 1, Seed: 21, Params: raised(21, 2, 2.5)}, 0, 0},
		{"drawn cell 1, rate raised", Config{Cells: 2, Minutes: 1, Seed: 21, Params: raised(21, 2, 2.5)}, 1, 0},
		{"drawn cell 1, look-ahead 16 bins", Config{Cells: 2, Minutes: 1, Seed: 21, Params: raised(21, 2, 2.5)}, 1, ModelLookahead},
		// A fast cell with latency 2 and short frames: three new frames can
		// matter, so the tree is three levels deep.
		{"short latency, three future frames", Config{Cells: 1, Minutes: 0.5, Seed: 5, FrameLengths: short, Params: []CellParams{shortCell(0, 2, 12)}}, 0, 0},
	}
	rejectedWrong := 0
	crit := func(df int) float64 {
		if df < 1 {
			return math.Inf(1) // one pool: nothing to test
		}
		return distuv.ChiSquared{K: float64(df)}.Quantile(1 - alpha)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, tr, rec, o := generate(t, tc.cfg)
			if err := o.SetLookahead(tc.ahead); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(99, uint64(tc.cell)))
			rejectedBefore := rejectedWrong
			p := &tr.Cells[tc.cell]
			sb := rec.Cells[tc.cell].SpikeBins
			// Wrong model for the power check: frames never end (the
			// longest length allowed outlasts any recording's frame).
			wrongTr := *tr
			wrongTr.FrameLengths = []FrameLength{{MaxFrameLengthBins, 1}}
			wrong, err := NewOracle(rec.Raw, &wrongTr)
			if err != nil {
				t.Fatal(err)
			}

			// Windows at several ages within frames (right after a switch,
			// mid-frame, just before the next switch), skipping quiet
			// stretches where the cell would hardly fire, and one right
			// after a spike (the history matters).
			probs := make([]float64, rgc.NumClasses)
			var ends []int
			ages := []int{1, 15, 30, 44}
			for fi := 20; fi < len(o.fr.pat) && len(ends) < len(ages); fi++ {
				end := o.fr.start[fi] + ages[len(ends)]
				if err := o.Probs(tc.cell, end, sb, probs); err != nil {
					t.Fatal(err)
				}
				if probs[rgc.NoSpikeClass] < 0.7 {
					ends = append(ends, end)
				}
			}
			for _, q := range sb[len(sb)/4:] {
				if err := o.Probs(tc.cell, int(q)+3, sb, probs); err != nil {
					t.Fatal(err)
				}
				if probs[rgc.NoSpikeClass] < 0.8 {
					ends = append(ends, int(q)+3)
					break
				}
			}
			if len(ends) < len(ages)+1 {
				t.Fatalf("found only %d windows where the cell fires", len(ends))
			}
			for _, end := range ends {
				hist := sb[:rgcFirstAfter(sb, end)]
				hist = hist[rgcFirstAfter(hist, end-len(p.HistFilter)):]
				if err := o.Probs(tc.cell, end, hist, probs); err != nil {
					t.Fatal(err)
				}
				sum := 0.0
				for _, v := range probs {
					sum += v
				}
				if math.Abs(sum-1) > 1e-9 {
					t.Fatalf("t=%d: probabilities sum to %.15f", end, sum)
				}
				obs := make([]int, rgc.NumClasses)
				sim := newMCSim(p, o.fr, tr.FrameLengths, end, end+tc.ahead, hist)
				for d := 0; d < draws; d++ {
					obs[sim.draw(r)]++
				}
				stat, df := chiSquare(obs, probs, draws)
				if df < 3 {
					t.Fatalf("t=%d: only %d degrees of freedom: the window tests too little", end, df)
				}
				if c := crit(df); stat > c {
					t.Errorf("t=%d: chi-square %.1f on %d df exceeds %.1f (alpha %g): oracle %v, observed %v", end, stat, df, c, alpha, probs, obs)
				}
				wp := make([]float64, rgc.NumClasses)
				if err := wrong.Probs(tc.cell, end, hist, wp); err != nil {
					t.Fatal(err)
				}
				if ws, wdf := chiSquare(obs, wp, draws); ws > crit(wdf) {
					rejectedWrong++
				}
			}
			t.Logf("a predictor ignoring frame switches was rejected in %d of %d windows", rejectedWrong-rejectedBefore, len(ends))
		})
	}
	if rejectedWrong == 0 {
		t.Error("the test has no power: a predictor that ignores frame switches passed every window")
	}
}

// rgcFirstAfter returns the index of the first spike after bin t.
func rgcFirstAfter(sb []int32, t int) int {
	i := 0
	for i < len(sb) && int(sb[i]) <= t {
		i++
	}
	return i
}

// raised draws n cells of a seed and adds db to their bias.
func raised(seed uint64, n int, db float64) []CellParams {
	ps := make([]CellParams, n)
	for i := range ps {
		ps[i] = DrawCell(seed, i, i)
		ps[i].Bias += db
	}
	return ps
}

// TestCalibrationOnRecording checks the oracle against a simulated
// recording: over windows whose horizons do not overlap (stride 81 bins),
// each window's true class is drawn from the oracle's distribution given the
// past, so (1) the class counts match the summed probabilities (a Pearson
// chi-square; with unequal probabilities per window the statistic is
// stochastically smaller than chi-square, so the test is conservative), and
// (2) NLL minus entropy has mean 0 with independent-increment (martingale)
// errors, so its mean is within 4 standard errors of 0.
func TestCalibrationOnRecording(t *testing.T) {
	_, _, rec, o := generate(t, Config{Cells: 4, Minutes: 4, Seed: 1234})
	obs := make([]int, rgc.NumClasses)
	exp := make([]float64, rgc.NumClasses)
	probs := make([]float64, rgc.NumClasses)
	var n int
	var sum, sumSq float64
	for c := range rec.Cells {
		sb := rec.Cells[c].SpikeBins
		for end := rgc.WindowBins - 1; end+rgc.Horizon < rec.Bins; end += rgc.Horizon + 1 {
			if err := o.Probs(c, end, sb, probs); err != nil {
				t.Fatal(err)
			}
			k := rgc.Target(sb, end)
			obs[k]++
			for j, p := range probs {
				exp[j] += p
			}
			d := -math.Log(probs[k]) - entropy(probs)
			sum += d
			sumSq += d * d
			n++
		}
	}
	stat, df := chiSquare(obs, norm(exp), n)
	crit := distuv.ChiSquared{K: float64(df)}.Quantile(1 - 1e-4)
	t.Logf("%d windows: chi-square %.1f on %d df (critical %.1f)", n, stat, df, crit)
	if df < 20 {
		t.Errorf("only %d degrees of freedom", df)
	}
	if stat > crit {
		t.Errorf("class counts do not match the oracle: chi-square %.1f > %.1f; observed %v, expected %v", stat, crit, obs, exp)
	}
	mean := sum / float64(n)
	se := math.Sqrt((sumSq/float64(n) - mean*mean) / float64(n))
	t.Logf("NLL - entropy: %.4f +- %.4f (standard error)", mean, se)
	if math.Abs(mean) > 4*se {
		t.Errorf("mean NLL - entropy = %.4f, more than 4 standard errors (%.4f) from 0", mean, se)
	}
}

// norm scales v to sum to 1.
func norm(v []float64) []float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / s
	}
	return out
}
