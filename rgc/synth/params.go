package synth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"rgcpred/rgc"
)

// TruthFile is the name of the side file holding a synthetic recording's
// true parameters, next to the recording's own files.
const TruthFile = "truth.json"

// Default filter geometry.
const (
	// StimFilterBins is the length of the drawn stimulus filters (j = 0..319
	// bins back, about 323 ms).
	StimFilterBins = 320
	// HistFilterBins is the length of the drawn spike-history filters
	// (1..100 bins back).
	HistFilterBins = 100
	// MinLatencyBins is the smallest response latency drawn: the stimulus
	// filter is exactly zero for lags below it.
	MinLatencyBins = 36
)

// MaxFrameLengthBins is the longest frame length a truth may list: the
// longest frame a recording may hold (rgc.MaxFrameSamples), in bins. The
// oracle allocates a table as long as the longest length.
const MaxFrameLengthBins = rgc.MaxFrameSamples / rgc.Decimation

// MaxTruthBytes bounds the size of a truth file that LoadTruth (and
// rgc/glm's loader) reads. Decoding JSON costs several times the text's
// size, so the bound caps what a hostile file can make the decoder
// allocate; a full truth of the shipped recording's 154 cells takes about
// 8 MB.
const MaxTruthBytes = 128 << 20

// FrameLength is one possible stimulus frame length and its probability.
type FrameLength struct {
	// Bins is the frame's length in model bins.
	Bins int `json:"bins"`
	// Prob is the probability of this length.
	Prob float64 `json:"prob"`
}

// DefaultFrameLengths returns the frame-length distribution of the real
// recording (data/chicken-17-08-21: 16,200 frames of 802-1488 sensor
// samples), each length rounded to whole bins of 18 samples; the
// probabilities are the frame counts over 16,200.
func DefaultFrameLengths() []FrameLength {
	counts := []struct{ bins, n int }{
		{45, 16}, {46, 64}, {47, 1659}, {48, 1564}, {49, 1351}, {50, 8041},
		{51, 450}, {52, 2714}, {53, 294}, {54, 33}, {55, 6}, {67, 1},
		{81, 4}, {82, 2}, {83, 1},
	}
	total := 0
	for _, c := range counts {
		total += c.n
	}
	out := make([]FrameLength, len(counts))
	for i, c := range counts {
		out[i] = FrameLength{Bins: c.bins, Prob: float64(c.n) / float64(total)}
	}
	return out
}

// CellParams are one simulated cell's true parameters (see the package
// documentation for the model).
type CellParams struct {
	// ClusterID is the cell's id in the recording.
	ClusterID int `json:"cluster_id"`
	// Type describes the cell: "on", "off" or "opponent".
	Type string `json:"type"`
	// NominalRateHz is the target rate the bias was calibrated for by
	// simulating the cell, history included; a recording's rate differs by
	// sampling error (about 15-20% at 1 Hz over a few minutes).
	NominalRateHz float64 `json:"nominal_rate_hz"`
	// Bias is b, the log intensity per bin at zero drive.
	Bias float64 `json:"bias"`
	// StimFilter holds k_c[j] per LED channel (red, green, blue, UV): the
	// weight of the stimulus j bins back (j = 0 is the current bin). All
	// four have the same length.
	StimFilter [rgc.StimChannels][]float64 `json:"stim_filter"`
	// HistFilter holds h[j] at index j-1: the weight of a spike j bins back,
	// j = 1..len(HistFilter).
	HistFilter []float64 `json:"hist_filter"`
}

// Truth is everything needed to rebuild a synthetic recording's oracle: the
// stimulus' frame-length distribution and every cell's parameters.
type Truth struct {
	// Seed is the population seed the recording was generated from.
	Seed uint64 `json:"seed"`
	// BinRateHz is the bin rate the model is defined at (rgc.BinRateHz).
	BinRateHz float64 `json:"bin_rate_hz"`
	// FrameLengths is the distribution of frame lengths, in bins.
	FrameLengths []FrameLength `json:"frame_lengths"`
	// Cells holds the cells' parameters, in recording order.
	Cells []CellParams `json:"cells"`
}

// ClusterIDs returns the cluster id of every cell of the truth, in order.
func (tr *Truth) ClusterIDs() []int {
	ids := make([]int, len(tr.Cells))
	for i, c := range tr.Cells {
		ids[i] = c.ClusterID
	}
	return ids
}

// Validate checks that the truth is usable: a proper frame-length
// distribution of lengths in 1..MaxFrameLengthBins, a positive, finite bin
// rate, and for every cell finite parameters, four equally long non-empty
// stimulus filters no longer than the model's window, and a history filter
// no longer than the window. Errors name the offending JSON field.
func (tr *Truth) Validate() error {
	if len(tr.FrameLengths) == 0 {
		return fmt.Errorf("truth: no frame lengths")
	}
	sum := 0.0
	seen := map[int]bool{}
	for i, f := range tr.FrameLengths {
		if f.Bins < 1 || f.Bins > MaxFrameLengthBins {
			return fmt.Errorf("truth: frame_lengths[%d]: length %d bins, want 1..%d", i, f.Bins, MaxFrameLengthBins)
		}
		if seen[f.Bins] {
			return fmt.Errorf("truth: frame_lengths[%d]: length %d bins listed twice", i, f.Bins)
		}
		seen[f.Bins] = true
		if !(f.Prob >= 0 && f.Prob <= 1) {
			return fmt.Errorf("truth: frame_lengths[%d]: probability %g not in [0, 1]", i, f.Prob)
		}
		sum += f.Prob
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("truth: frame-length probabilities sum to %g, want 1", sum)
	}
	if !finite(tr.BinRateHz) || tr.BinRateHz <= 0 {
		return fmt.Errorf("truth: bin_rate_hz = %g is not a positive finite rate", tr.BinRateHz)
	}
	ids := map[int]bool{}
	for i := range tr.Cells {
		c := &tr.Cells[i]
		if ids[c.ClusterID] {
			return fmt.Errorf("truth: cells[%d]: duplicate cluster id %d", i, c.ClusterID)
		}
		ids[c.ClusterID] = true
		if !finite(c.Bias) {
			return fmt.Errorf("truth: cells[%d] (cluster %d): bias %g is not finite", i, c.ClusterID, c.Bias)
		}
		if !finite(c.NominalRateHz) || c.NominalRateHz < 0 {
			return fmt.Errorf("truth: cells[%d] (cluster %d): nominal_rate_hz = %g is not a finite rate >= 0", i, c.ClusterID, c.NominalRateHz)
		}
		n := len(c.StimFilter[0])
		if n == 0 || n > rgc.WindowBins-rgc.Horizon {
			return fmt.Errorf("truth: cells[%d] (cluster %d): stimulus filter of %d bins, want 1..%d", i, c.ClusterID, n, rgc.WindowBins-rgc.Horizon)
		}
		for ch := range c.StimFilter {
			if len(c.StimFilter[ch]) != n {
				return fmt.Errorf("truth: cells[%d] (cluster %d): stimulus filter channel %d has %d bins, channel 0 has %d", i, c.ClusterID, ch, len(c.StimFilter[ch]), n)
			}
			for j, v := range c.StimFilter[ch] {
				if !finite(v) {
					return fmt.Errorf("truth: cells[%d] (cluster %d): stimulus filter channel %d lag %d is %g", i, c.ClusterID, ch, j, v)
				}
			}
		}
		if len(c.HistFilter) > rgc.WindowBins-rgc.Horizon {
			return fmt.Errorf("truth: cells[%d] (cluster %d): history filter of %d bins, want at most %d", i, c.ClusterID, len(c.HistFilter), rgc.WindowBins-rgc.Horizon)
		}
		for j, v := range c.HistFilter {
			if !finite(v) {
				return fmt.Errorf("truth: cells[%d] (cluster %d): history filter lag %d is %g", i, c.ClusterID, j+1, v)
			}
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Save writes the truth as indented JSON to dir/truth.json. Floats are
// written in their shortest exact form, so LoadTruth restores them bit for
// bit.
func (tr *Truth) Save(dir string) error {
	data, err := json.MarshalIndent(tr, "", " ")
	if err != nil {
		return fmt.Errorf("save truth: %w", err)
	}
	path := filepath.Join(dir, TruthFile)
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("save truth: %w", err)
	}
	return nil
}

// LoadTruth reads and validates dir/truth.json (at most MaxTruthBytes).
func LoadTruth(dir string) (*Truth, error) {
	path := filepath.Join(dir, TruthFile)
	data, err := ReadTruthFile(path)
	if err != nil {
		return nil, fmt.Errorf("load truth: %w", err)
	}
	tr, err := decodeTruth(data)
	if err != nil {
		return nil, fmt.Errorf("load truth %s: %w", path, err)
	}
	return tr, nil
}

// ReadTruthFile reads the file at path, refusing one larger than
// MaxTruthBytes before reading it (and stopping a read that grows past the
// bound). Errors name the path.
func ReadTruthFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxTruthBytes {
		return nil, fmt.Errorf("%s: %d bytes, larger than %d bytes", path, st.Size(), MaxTruthBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxTruthBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxTruthBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxTruthBytes)
	}
	return data, nil
}

// decodeTruth decodes and validates the content of a truth.json: one JSON
// object with no unknown fields and nothing after it.
func decodeTruth(data []byte) (*Truth, error) {
	var tr Truth
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tr); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	if err := tr.Validate(); err != nil {
		return nil, err
	}
	return &tr, nil
}

// Stream numbers separate the independent random streams of one seed.
const (
	streamStimulus = 1
	streamParams   = 1 << 32
	streamSpikes   = 2 << 32
)

// newRand returns the PCG generator of one stream of a seed.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// uniform draws from [lo, hi).
func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// DrawCell draws the parameters of cell number index of the population with
// the given seed (see the package documentation for the distributions; 40%
// ON, 40% OFF, 20% colour-opponent cells). The same seed and index always
// give the same cell. It simulates the cell for a few minutes to calibrate
// its bias (about 10-20 ms of CPU).
func DrawCell(seed uint64, index, clusterID int) CellParams {
	r := newRand(seed, streamParams+uint64(index))
	c := CellParams{ClusterID: clusterID}

	// Channel gains: polarity and spectral weighting.
	var gain [rgc.StimChannels]float64
	for ch := range gain {
		gain[ch] = uniform(r, 0.2, 1)
	}
	switch u := r.Float64(); {
	case u < 0.4:
		c.Type = "on"
	case u < 0.8:
		c.Type = "off"
		for ch := range gain {
			gain[ch] = -gain[ch]
		}
	default:
		c.Type = "opponent"
		// Long wavelengths (red, green) against short ones (blue, UV).
		sign := 1.0
		if r.IntN(2) == 0 {
			sign = -1
		}
		gain[0], gain[1] = sign*gain[0], sign*gain[1]
		gain[2], gain[3] = -sign*gain[2], -sign*gain[3]
	}

	// Temporal shape: a pure latency, then a fast positive gamma lobe minus
	// a slower one of 70-100% of its area. The filter is nearly balanced
	// (transient): the cell answers LED transitions with a short, precisely
	// timed burst and hardly responds to a level held, like chicken RGCs
	// under full-field chromatic flashes (Seifert et al. 2023). Latencies
	// differ slightly between channels.
	latency := MinLatencyBins + r.IntN(15)
	tau1 := uniform(r, 4, 8)
	tau2 := tau1 * uniform(r, 1.5, 2.2)
	beta := uniform(r, 0.7, 1) * tau1 / tau2 // lobe areas are proportional to tau
	var unit [rgc.StimChannels][]float64
	for ch := range unit {
		d := latency + r.IntN(5)
		unit[ch] = biphasic(StimFilterBins, d, tau1, tau2, beta)
	}
	// Scale so that the stimulus drive has standard deviation sigma: large
	// against the spontaneous level, so most spikes are stimulus-locked.
	sigma := uniform(r, 2.2, 3.2)
	for ch := range unit {
		c.StimFilter[ch] = make([]float64, StimFilterBins)
		for j, v := range unit[ch] {
			c.StimFilter[ch][j] = gain[ch] * v
		}
	}
	sd := math.Sqrt(driveVariance(c.StimFilter, 50))
	for ch := range c.StimFilter {
		for j := range c.StimFilter[ch] {
			c.StimFilter[ch][j] *= sigma / sd
		}
	}

	// History: refractory dip, bursting bump, slow adaptation.
	refr := uniform(r, 4, 8)
	tauR := uniform(r, 1, 2.5)
	burst := uniform(r, 0.5, 2)
	peak := uniform(r, 4, 10)
	width := uniform(r, 1, 2.5)
	adapt := uniform(r, 0.1, 0.5)
	tauA := uniform(r, 15, 40)
	c.HistFilter = make([]float64, HistFilterBins)
	for {
		for i := range c.HistFilter {
			j := float64(i + 1)
			z := (j - peak) / width
			c.HistFilter[i] = -refr*math.Exp(-(j-1)/tauR) + burst*math.Exp(-z*z/2) - adapt*math.Exp(-j/tauA)
		}
		// Stability: a cell firing periodically every k bins feels
		// sum_m h[m k] from its own past; keep that at most -2 for every
		// period up to 12 bins (80 Hz and faster), so that no burst
		// sustains itself (strengthen the adaptation until it holds).
		if maxPeriodicHistory(c.HistFilter, 12) <= -2 {
			break
		}
		adapt += 0.1
	}

	// Baseline: a log-uniform target rate of 0.9-8 Hz, reached by
	// simulating the cell (history included) on a calibration stimulus.
	c.NominalRateHz = math.Exp(uniform(r, math.Log(0.9), math.Log(8)))
	calibrateBias(&c, r.Uint64(), r.Uint64())
	return c
}

// Bias calibration: simulated length and number of corrections.
const (
	calibBins  = 120000 // about 2 minutes
	calibSteps = 5
)

// calibrateBias sets c.Bias so that the cell fires at about
// c.NominalRateHz: a first guess from the mean of exp(drive) over a
// calibration stimulus, then calibSteps corrections b += log(target/rate)
// from simulations of the cell on that stimulus, each with the same random
// numbers (seeded by s1, s2) so the rate is a smooth function of b. The
// remaining error is mostly the sampling error of 2 minutes of bursty
// spikes (about 15% at 1 Hz, 5% at 8 Hz).
func calibrateBias(c *CellParams, s1, s2 uint64) {
	f := drawFrames(newRand(s1, s2), DefaultFrameLengths(), calibBins)
	m := newCellModel(c)
	drive := stimulusDrive(m, f, nil)
	meanExp := 0.0
	for _, d := range drive[m.lk:] {
		meanExp += math.Exp(d)
	}
	target := c.NominalRateHz / rgc.BinRateHz // spikes per bin
	m.bias = math.Log(target) - math.Log(meanExp/float64(len(drive)-m.lk))
	for step := 0; step < calibSteps; step++ {
		spikes := simulateDrive(m, drive, newRand(s2, s1))
		if len(spikes) == 0 {
			m.bias += 2
			continue
		}
		m.bias += math.Log(target * float64(len(drive)) / float64(len(spikes)))
	}
	c.Bias = m.bias
}

// maxPeriodicHistory returns max over periods k <= maxPeriod of
// sum_{m>=1} h[m k]: the history term of a cell that has fired every k bins
// for ever.
func maxPeriodicHistory(h []float64, maxPeriod int) float64 {
	best := math.Inf(-1)
	for k := 1; k <= min(maxPeriod, len(h)); k++ {
		s := 0.0
		for j := k; j <= len(h); j += k {
			s += h[j-1]
		}
		best = max(best, s)
	}
	return best
}

// biphasic returns a filter of n bins: zero below lag d, then
// g(x; tau1) - beta g(x; tau2) at x = j - d, with g(x; tau) = (x/tau)^2
// exp(2 - x/tau) a gamma-shaped lobe peaking at 4 at x = 2 tau (its area
// is 2 e^2 tau, proportional to tau).
func biphasic(n, d int, tau1, tau2, beta float64) []float64 {
	k := make([]float64, n)
	for j := d; j < n; j++ {
		x := float64(j - d)
		a, b := x/tau1, x/tau2
		k[j] = a*a*math.Exp(2-a) - beta*b*b*math.Exp(2-b)
	}
	return k
}

// driveVariance approximates the variance of the stimulus drive
// sum_c sum_j k_c[j] s_c[u-j] for frames of frameLen bins whose LED states
// are independent +-0.5, averaged over the phase of u within a frame.
func driveVariance(k [rgc.StimChannels][]float64, frameLen int) float64 {
	total := 0.0
	for phase := 0; phase < frameLen; phase++ {
		for ch := range k {
			// Frame m covers lags [phase + (m-1) frameLen, phase + m frameLen).
			for lo := phase - frameLen; lo < len(k[ch]); lo += frameLen {
				s := 0.0
				for j := max(lo, 0); j < min(lo+frameLen, len(k[ch])); j++ {
					s += k[ch][j]
				}
				total += 0.25 * s * s
			}
		}
	}
	return total / float64(frameLen)
}
