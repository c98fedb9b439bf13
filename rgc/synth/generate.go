package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"rgcpred/rgc"
)

// Config describes a synthetic recording to generate.
type Config struct {
	// Cells is the number of cells (cluster ids 0..Cells-1, all quality).
	Cells int
	// Minutes is the recording's length; frames are drawn until it is
	// covered, so the recording is at most one frame longer.
	Minutes float64
	// Seed selects the population and its stimulus and spikes.
	Seed uint64
	// FrameLengths is the frame-length distribution in bins; nil means
	// DefaultFrameLengths.
	FrameLengths []FrameLength
	// Params, when non-nil, gives the cells' parameters instead of drawing
	// them (len(Params) must equal Cells); tests use it for special cells.
	Params []CellParams
}

// Generate simulates a recording: the stimulus, then every cell's spikes
// (cells in parallel, each from its own random stream, so the result does
// not depend on scheduling). It returns the recording in the shared layout
// (write it with Raw.Write) and the truth that rebuilds its oracle.
func Generate(ctx context.Context, cfg Config) (*rgc.Raw, *Truth, error) {
	if cfg.Cells < 1 {
		return nil, nil, fmt.Errorf("synth: %d cells, want at least 1", cfg.Cells)
	}
	if !(cfg.Minutes > 0) || cfg.Minutes > 24*60 {
		return nil, nil, fmt.Errorf("synth: %g minutes, want a length in (0, 1440]", cfg.Minutes)
	}
	tr := &Truth{Seed: cfg.Seed, BinRateHz: rgc.BinRateHz, FrameLengths: cfg.FrameLengths}
	if tr.FrameLengths == nil {
		tr.FrameLengths = DefaultFrameLengths()
	}
	if cfg.Params != nil {
		if len(cfg.Params) != cfg.Cells {
			return nil, nil, fmt.Errorf("synth: %d cell parameter sets for %d cells", len(cfg.Params), cfg.Cells)
		}
		tr.Cells = append([]CellParams(nil), cfg.Params...)
	} else {
		// Each draw calibrates its bias by simulation: draw in parallel.
		tr.Cells = make([]CellParams, cfg.Cells)
		var wg sync.WaitGroup
		next := make(chan int)
		for w := 0; w < min(runtime.GOMAXPROCS(0), cfg.Cells); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					tr.Cells[i] = DrawCell(cfg.Seed, i, i)
				}
			}()
		}
		for i := range tr.Cells {
			if ctx.Err() != nil {
				break
			}
			next <- i
		}
		close(next)
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("synth: %w", err)
		}
	}
	if err := tr.Validate(); err != nil {
		return nil, nil, fmt.Errorf("synth: %w", err)
	}

	bins := int(math.Ceil(cfg.Minutes * 60 * rgc.BinRateHz))
	fr := drawFrames(newRand(cfg.Seed, streamStimulus), tr.FrameLengths, bins)
	raw := &rgc.Raw{
		Name:          fmt.Sprintf("synthetic-seed%d-%dcells-%gmin", cfg.Seed, cfg.Cells, cfg.Minutes),
		Species:       "synthetic",
		Source:        "rgcpred/rgc/synth: generalised linear model cells with spike history (Pillow et al. 2008) driven by four-LED full-field noise like Seifert et al. (2023)",
		SampleRateHz:  rgc.SensorRateHz,
		NumSamples:    int64(fr.end()) * rgc.Decimation,
		StimulusName:  "FF_Noise",
		Channels:      []string{"red", "green", "blue", "uv"},
		WavelengthsNm: []int{680, 530, 470, 400},
		FrameRateHz:   20,
		Pattern:       make([][rgc.StimChannels]int8, len(fr.pat)),
		Triggers:      make([]int64, len(fr.start)),
		Cells:         make([]rgc.CellInfo, cfg.Cells),
	}
	for i, p := range fr.pat {
		for c := range raw.Pattern[i] {
			raw.Pattern[i][c] = int8(p >> c & 1)
		}
	}
	for i, s := range fr.start {
		raw.Triggers[i] = int64(s) * rgc.Decimation
	}

	workers := min(runtime.GOMAXPROCS(0), cfg.Cells)
	jobs := make(chan int)
	errs := make([]error, cfg.Cells)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := ctx.Err(); err != nil {
					errs[i] = err
					continue
				}
				m := newCellModel(&tr.Cells[i])
				r := newRand(cfg.Seed, streamSpikes+uint64(i))
				spikes := simulate(m, fr, r)
				samples := make([]int64, len(spikes))
				for k, b := range spikes {
					// A spike anywhere inside its bin; floor(sample/18)
					// recovers the bin.
					samples[k] = int64(b)*rgc.Decimation + int64(r.IntN(rgc.Decimation))
				}
				raw.Cells[i] = rgc.CellInfo{ClusterID: tr.Cells[i].ClusterID, Quality: true, Spikes: samples}
			}
		}()
	}
	for i := 0; i < cfg.Cells; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("synth: cell %d: %w", i, err)
		}
	}
	if err := raw.Validate(); err != nil {
		return nil, nil, fmt.Errorf("synth: generated recording is invalid: %w", err)
	}
	return raw, tr, nil
}

// drawFrames draws frames (lengths from dist, patterns uniform over the 16)
// until they cover at least bins bins.
func drawFrames(r *rand.Rand, dist []FrameLength, bins int) *frames {
	cum := make([]float64, len(dist))
	s := 0.0
	for i, d := range dist {
		s += d.Prob
		cum[i] = s
	}
	f := &frames{start: []int{0}}
	for f.end() < bins {
		u := r.Float64() * s
		// The first length whose cumulative probability exceeds u: a
		// zero-probability length is never picked.
		i := sort.Search(len(cum), func(i int) bool { return cum[i] > u })
		for i == len(cum) || dist[i].Prob == 0 { // rounding at the top end
			i--
		}
		f.pat = append(f.pat, uint8(r.IntN(numPatterns)))
		f.start = append(f.start, f.end()+dist[i].Bins)
	}
	return f
}

// simulate runs the cell's GLM over every bin of the stimulus and returns
// the bins holding a spike.
func simulate(m *cellModel, f *frames, r *rand.Rand) []int32 {
	return simulateDrive(m, stimulusDrive(m, f, nil), r)
}

// stimulusDrive returns the cell's stimulus drive in every bin of the
// stimulus, reusing buf when it is long enough.
func stimulusDrive(m *cellModel, f *frames, buf []float64) []float64 {
	if cap(buf) < f.end() {
		buf = make([]float64, f.end())
	}
	drive := buf[:f.end()]
	fu := 0
	for u := range drive {
		for fu+1 < len(f.pat) && f.start[fu+1] <= u {
			fu++
		}
		drive[u] = m.stimDrive(f, u, fu)
	}
	return drive
}

// simulateDrive runs the cell's GLM over bins 0..len(drive)-1 given its
// stimulus drive per bin and returns the bins holding a spike.
func simulateDrive(m *cellModel, drive []float64, r *rand.Rand) []int32 {
	var spikes []int32
	nh := len(m.hist)
	for u, d := range drive {
		eta := m.bias + d
		for k := len(spikes) - 1; k >= 0; k-- {
			lag := u - int(spikes[k])
			if lag > nh {
				break
			}
			eta += m.hist[lag-1]
		}
		// P(spike) = 1 - exp(-lambda).
		if r.Float64() < -math.Expm1(-math.Exp(eta)) {
			spikes = append(spikes, int32(u))
		}
	}
	return spikes
}
