package rgc

import (
	"fmt"
	"math"

	"rgcpred/base/cli"
)

// Cell is one cluster's spike train in the model's time base.
type Cell struct {
	// ClusterID is the spike sorter's cluster id, the cell's identity.
	ClusterID int
	// Quality marks the cells kept by the reference quality filter.
	Quality bool
	// SpikeBins holds the bin of every spike (bin = floor(sample /
	// Decimation)), ascending; a bin appears twice when two spikes fall in it.
	SpikeBins []int32
}

// NumSpikes returns the number of spikes of the cell.
func (c *Cell) NumSpikes() int { return len(c.SpikeBins) }

// RateHz returns the cell's mean firing rate over a recording of bins bins
// at BinRateHz (0 for an empty recording).
func (c *Cell) RateHz(bins int) float64 {
	if bins <= 0 {
		return 0
	}
	return float64(len(c.SpikeBins)) / (float64(bins) / BinRateHz)
}

// Counts returns the cell's spike count in each bin of [from, to) as a count
// vector of length to-from (the form the metrics take).
func (c *Cell) Counts(from, to int) []float64 {
	if to < from {
		to = from
	}
	out := make([]float64, to-from)
	for i := firstAtLeast(c.SpikeBins, from); i < len(c.SpikeBins) && int(c.SpikeBins[i]) < to; i++ {
		out[int(c.SpikeBins[i])-from]++
	}
	return out
}

// Recording is a recording in the model's time base: Bins bins at BinRateHz,
// the binned stimulus (in StimMode), and every cell's binned spikes.
type Recording struct {
	// Name is the recording's name.
	Name string
	// SampleRateHz is the sensor sample rate of the source recording.
	SampleRateHz float64
	// Bins is the recording's length in bins: NumSamples / Decimation,
	// rounded down.
	Bins int
	// Stimulus[c][b] is LED c's intensity at bin b (0 off, 1 on, in between
	// near an edge; see BinStimulus); each row has Bins entries.
	Stimulus [StimChannels][]float32
	// StimMode is how Stimulus was binned; a model reads it only in the
	// mode it was trained on.
	StimMode StimMode
	// Cells holds every cluster in file order; spikes in the trailing
	// partial bin are dropped.
	Cells []Cell
	// Raw is the recording as read from disk.
	Raw *Raw
}

// Load reads, validates and bins the recording in dir with the default
// stimulus mode, StimCausal.
func Load(dir string) (*Recording, error) { return LoadMode(dir, StimCausal) }

// LoadMode reads, validates and bins the recording in dir with stimulus
// mode mode.
func LoadMode(dir string, mode StimMode) (*Recording, error) {
	raw, err := LoadRaw(dir)
	if err != nil {
		return nil, err
	}
	rec, err := raw.BinMode(mode)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", dir, err)
	}
	return rec, nil
}

// Bin converts the raw recording to the model's time base with the default
// stimulus mode, StimCausal (see BinMode).
func (r *Raw) Bin() (*Recording, error) { return r.BinMode(StimCausal) }

// BinMode converts the raw recording to the model's time base: spike bin =
// floor(sample / Decimation) and the stimulus from BinStimulus in mode.
func (r *Raw) BinMode(mode StimMode) (*Recording, error) {
	if _, err := mode.MarshalText(); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	bins64 := r.NumSamples / Decimation
	if bins64 > math.MaxInt32 {
		return nil, fmt.Errorf("%s: num_sensor_samples = %d is too long for int32 bin indices", FileJSON, r.NumSamples)
	}
	bins := int(bins64)
	rec := &Recording{
		Name:         r.Name,
		SampleRateHz: r.SampleRateHz,
		Bins:         bins,
		Stimulus:     BinStimulus(mode, r.Pattern, r.Triggers, r.NumSamples),
		StimMode:     mode,
		Cells:        make([]Cell, len(r.Cells)),
		Raw:          r,
	}
	for i, c := range r.Cells {
		sb := make([]int32, 0, len(c.Spikes))
		for _, s := range c.Spikes {
			b := s / Decimation
			if b >= bins64 {
				break // trailing partial bin; spikes are ascending
			}
			sb = append(sb, int32(b))
		}
		rec.Cells[i] = Cell{ClusterID: c.ClusterID, Quality: c.Quality, SpikeBins: sb}
	}
	return rec, nil
}

// Zero-phase filter parameters (see BinStimulus, StimZeroPhase).
const (
	// StimFilterHalfTaps is M: the FIR filter has 2M+1 taps at the sensor
	// rate, spanning +-16 bins.
	StimFilterHalfTaps = 16 * Decimation
	// StimFilterCutoff is the filter's cutoff as a fraction of the sensor
	// rate: 0.8 times the Nyquist frequency of the bins (about 397 Hz).
	StimFilterCutoff = 0.8 * 0.5 / Decimation
)

// stimKernelCum returns the cumulative sum of the normalised low-pass
// kernel: cum[i] = sum of h[-M..i-M], for i in 0..2M.
func stimKernelCum() []float64 {
	const m = StimFilterHalfTaps
	h := make([]float64, 2*m+1)
	sum := 0.0
	for i := range h {
		k := float64(i - m)
		v := 2 * StimFilterCutoff
		if k != 0 {
			v = math.Sin(2*math.Pi*StimFilterCutoff*k) / (math.Pi * k)
		}
		// Hamming window over the 2M+1 taps.
		v *= 0.54 + 0.46*math.Cos(math.Pi*k/m)
		h[i] = v
		sum += v
	}
	cum := make([]float64, len(h))
	acc := 0.0
	for i, v := range h {
		acc += v / sum // unit gain at DC: a steady "on" stays 1
		cum[i] = acc
	}
	return cum
}

// BinStimulus converts the frame pattern to LED intensities per bin in
// mode. Each LED is a step function at the sensor rate (1 while on during a
// frame [triggers[f], triggers[f+1]), 0 when off, before the first trigger
// and after the last). The result has numSamples/Decimation bins per
// channel.
//
// StimCausal: each bin's value is the LED's on-fraction over the bin's own
// samples 18b..18b+17, exact from the step function, so it depends on
// nothing after the bin's end. An edge shows up in the bin it falls in, as
// a fraction; the price against zero-phase is aliasing (box averaging
// passes some content above the bin Nyquist frequency, which is harmless
// for a step input: a frame lasts 44 bins or more) and an edge's timing
// resolved only through that fraction (docs/data.md).
//
// StimZeroPhase: low-pass filtered with a zero-phase windowed-sinc FIR
// filter - Hamming window, 2*16*18+1 = 577 taps at the sensor rate (+-16
// bins), cutoff 0.8 x the bin Nyquist frequency (about 397 Hz), normalised
// to unit DC gain (gain below 1% from the bin Nyquist frequency up) - and
// then sampled at each bin's centre, sample 18b+9, so LED edges are not
// aliased. Zero phase means no delay, as with scipy's default decimate; the
// price is that an edge starts to show up to 16 bins (mostly within 1-2
// bins) before it happens, and a sharp low-pass rings at edges (Gibbs:
// about 8.8% over- and undershoot), so intensities lie in about [-0.09,
// 1.09]. Not causal: it reproduces the reference pipeline. Because the
// input is piecewise constant, each output is computed exactly from the
// kernel's cumulative sum over the (at most a few) frames the kernel
// overlaps, rather than by convolving every sensor sample.
func BinStimulus(mode StimMode, pattern [][StimChannels]int8, triggers []int64, numSamples int64) [StimChannels][]float32 {
	var out [StimChannels][]float32
	bins := 0
	if numSamples > 0 {
		bins = int(numSamples / Decimation)
	}
	for c := range out {
		out[c] = make([]float32, bins)
	}
	if len(triggers) < 2 || len(pattern) == 0 {
		return out
	}
	nf := len(triggers) - 1
	if len(pattern) < nf {
		nf = len(pattern)
	}
	if mode == StimCausal {
		binCausal(pattern, triggers, nf, bins, &out)
		return out
	}
	const m = StimFilterHalfTaps
	cum := stimKernelCum()
	// H(k) = sum of h[j] for j <= k, k relative to the centre.
	H := func(k int64) float64 {
		switch {
		case k < -m:
			return 0
		case k >= m:
			return 1
		}
		return cum[k+m]
	}
	f0 := 0 // first frame that may overlap the current kernel support
	var acc [StimChannels]float64
	for b := 0; b < bins; b++ {
		centre := int64(b)*Decimation + Decimation/2
		lo, hi := centre-m, centre+m // support of x[centre-k], k in [-M, M]
		for f0 < nf && triggers[f0+1] <= lo {
			f0++
		}
		acc = [StimChannels]float64{}
		for f := f0; f < nf && triggers[f] <= hi; f++ {
			s, e := triggers[f], triggers[f+1]
			// Samples n in [s, e) contribute h[centre-n]: k in (centre-e, centre-s].
			w := H(centre-s) - H(centre-e)
			for ch := 0; ch < StimChannels; ch++ {
				if pattern[f][ch] != 0 {
					acc[ch] += w
				}
			}
		}
		for ch := range acc {
			out[ch][b] = float32(acc[ch])
		}
	}
	return out
}

// BinRateHz returns the recording's bin rate, SampleRateHz / Decimation (the
// package's BinRateHz when SampleRateHz is not set).
func (r *Recording) BinRateHz() float64 {
	if r.SampleRateHz > 0 {
		return r.SampleRateHz / Decimation
	}
	return BinRateHz
}

// DurationS returns the recording's length in seconds.
func (r *Recording) DurationS() float64 { return float64(r.Bins) / r.BinRateHz() }

// RateHz returns the mean firing rate of cell (an index into r.Cells).
func (r *Recording) RateHz(cell int) float64 {
	if r.Bins == 0 {
		return 0
	}
	return float64(len(r.Cells[cell].SpikeBins)) / r.DurationS()
}

// CellIndex returns the index in r.Cells of the cell with clusterID.
func (r *Recording) CellIndex(clusterID int) (int, bool) {
	for i := range r.Cells {
		if r.Cells[i].ClusterID == clusterID {
			return i, true
		}
	}
	return -1, false
}

// ClusterIDs returns every cell's cluster id, in r.Cells order.
func (r *Recording) ClusterIDs() []int {
	ids := make([]int, len(r.Cells))
	for i := range r.Cells {
		ids[i] = r.Cells[i].ClusterID
	}
	return ids
}

// QualityClusterIDs returns the cluster ids of the quality cells, in
// r.Cells order.
func (r *Recording) QualityClusterIDs() []int {
	var ids []int
	for i := range r.Cells {
		if r.Cells[i].Quality {
			ids = append(ids, r.Cells[i].ClusterID)
		}
	}
	return ids
}

// QualityCells returns the indices into r.Cells of the quality cells.
func (r *Recording) QualityCells() []int {
	var idx []int
	for i := range r.Cells {
		if r.Cells[i].Quality {
			idx = append(idx, i)
		}
	}
	return idx
}

// SelectCells resolves a cell selector to indices into r.Cells: "quality"
// (the quality-filtered cells), "all", or comma-separated cluster ids, each
// of a cell of the recording. Selecting no cell is an error.
func (r *Recording) SelectCells(spec string) ([]int, error) {
	var idx []int
	switch spec {
	case "quality":
		idx = r.QualityCells()
	case "all":
		idx = make([]int, len(r.Cells))
		for i := range idx {
			idx[i] = i
		}
	default:
		ids, err := cli.Ints(spec)
		if err != nil {
			return nil, fmt.Errorf("cells %q: want quality or all, or cluster ids: %w", spec, err)
		}
		if idx, err = r.CellIndices(ids); err != nil {
			return nil, err
		}
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("recording %s has no %s cells", r.Name, spec)
	}
	return idx, nil
}

// CellIndices maps cluster ids to indices into r.Cells; an unknown id is an
// error.
func (r *Recording) CellIndices(clusterIDs []int) ([]int, error) {
	out := make([]int, len(clusterIDs))
	for i, id := range clusterIDs {
		k, ok := r.CellIndex(id)
		if !ok {
			return nil, fmt.Errorf("recording %s: no cell with cluster id %d", r.Name, id)
		}
		out[i] = k
	}
	return out, nil
}

// firstAtLeast returns the index of the first element of the ascending
// slice s that is >= v (len(s) if none).
func firstAtLeast(s []int32, v int) int {
	if v > math.MaxInt32 {
		return len(s)
	}
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int(s[mid]) < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
