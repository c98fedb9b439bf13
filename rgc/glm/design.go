package glm

import (
	"fmt"
	"sort"
	"sync"

	"rgcpred/rgc"
	"rgcpred/rgc/synth"
)

// Frames is a recording's stimulus on the model's bins: frame i covers bins
// [Start[i], Start[i+1]) with LED c on when bit c of Pattern[i] is set. Bins
// before Start[0] and from End() on have every LED at the mean level.
type Frames struct {
	// Start holds each frame's first bin plus the end of the last frame.
	Start []int
	// Pattern holds each frame's LEDs, bit c for LED c.
	Pattern []uint8
}

// End returns the first bin after the last frame.
func (f *Frames) End() int { return f.Start[len(f.Start)-1] }

// AlignFrames rounds every stimulus trigger of raw to the nearest bin
// boundary (sample 18b): a frame then covers whole bins, and the bin that a
// switch falls in belongs to the frame that lit most of it. This is the
// stimulus the fitted GLM is defined on; the synthetic recordings of
// rgc/synth are aligned already and come out unchanged.
func AlignFrames(raw *rgc.Raw) (*Frames, error) {
	trig, err := alignTriggers(raw)
	if err != nil {
		return nil, err
	}
	al := *raw
	al.Triggers = trig
	start, pat, err := synth.ReadFrames(&al)
	if err != nil {
		return nil, err
	}
	return &Frames{Start: start, Pattern: pat}, nil
}

// alignTriggers returns raw's triggers rounded to the nearest bin boundary
// (a multiple of rgc.Decimation sensor samples), refusing a recording whose
// frames would vanish.
func alignTriggers(raw *rgc.Raw) ([]int64, error) {
	if len(raw.Pattern) == 0 {
		return nil, fmt.Errorf("recording %s has no stimulus frames", raw.Name)
	}
	if len(raw.Triggers) != len(raw.Pattern)+1 {
		return nil, fmt.Errorf("recording %s: %d triggers for %d frames", raw.Name, len(raw.Triggers), len(raw.Pattern))
	}
	out := make([]int64, len(raw.Triggers))
	for i, s := range raw.Triggers {
		if s < 0 {
			return nil, fmt.Errorf("recording %s: trigger %d at negative sample %d", raw.Name, i, s)
		}
		out[i] = (s + rgc.Decimation/2) / rgc.Decimation * rgc.Decimation
		if i > 0 && out[i] <= out[i-1] {
			return nil, fmt.Errorf("recording %s: frame %d (triggers at samples %d, %d) is shorter than half a bin", raw.Name, i-1, raw.Triggers[i-1], s)
		}
	}
	return out, nil
}

// AlignedRaw returns a copy of raw whose triggers are rounded to bin
// boundaries as AlignFrames does (the form rgc/synth's oracle accepts),
// holding only the cells with the given cluster ids, in that order.
func AlignedRaw(raw *rgc.Raw, clusterIDs []int) (*rgc.Raw, error) {
	trig, err := alignTriggers(raw)
	if err != nil {
		return nil, err
	}
	out := *raw
	out.Triggers = trig
	byID := make(map[int]int, len(raw.Cells))
	for i, c := range raw.Cells {
		byID[c.ClusterID] = i
	}
	out.Cells = make([]rgc.CellInfo, len(clusterIDs))
	for i, id := range clusterIDs {
		j, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("recording %s has no cell with cluster id %d", raw.Name, id)
		}
		out.Cells[i] = raw.Cells[j]
	}
	return &out, nil
}

// FrameLengths returns the empirical distribution of the frames' lengths in
// bins, ascending.
func (f *Frames) FrameLengths() (bins []int, probs []float64) {
	count := map[int]int{}
	for i := range f.Pattern {
		count[f.Start[i+1]-f.Start[i]]++
	}
	for l := range count {
		bins = append(bins, l)
	}
	sort.Ints(bins)
	for _, l := range bins {
		probs = append(probs, float64(count[l])/float64(len(f.Pattern)))
	}
	return bins, probs
}

// frameAt returns the index of the frame covering bin b (-1 before the
// first frame, the last frame's index at or after End()).
func (f *Frames) frameAt(b int) int {
	return sort.SearchInts(f.Start[:len(f.Pattern)], b+1) - 1
}

// stimDesign computes the stimulus columns of the design matrix for bins
// 0..n-1: column c*nb+i of bin u is sum_j B_i(j) s_c(u-j), with s_c = +-0.5
// LED c's state in the frame covering a bin (0 outside the frames). Rows are
// stored back to back in float32. The sum over lags is a sum over the frames
// the basis reaches, each contributing its state times a difference of the
// basis' running sums. Bins are split between workers goroutines.
func stimDesign(f *Frames, b *Basis, n, workers int) []float32 {
	nb := len(b.Rows)
	cols := rgc.StimChannels * nb
	out := make([]float32, n*cols)
	cum := b.cumulative()
	at := func(i, lag int) float64 { // C_i(lag), 0 below 0, held beyond Len
		if lag < 0 {
			return 0
		}
		return cum[i][min(lag, b.Len-1)]
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			row := make([]float64, cols)
			for u := lo; u < hi; u++ {
				clear(row)
				for fi := f.frameAt(u); fi >= 0; fi-- {
					a, e := f.Start[fi], f.Start[fi+1]
					loLag := max(u-e+1, 0)
					if loLag >= b.Len {
						break
					}
					hiLag := u - a
					for c := 0; c < rgc.StimChannels; c++ {
						s := -0.5
						if f.Pattern[fi]>>c&1 == 1 {
							s = 0.5
						}
						for i := 0; i < nb; i++ {
							row[c*nb+i] += s * (at(i, hiLag) - at(i, loLag-1))
						}
					}
				}
				dst := out[u*cols : (u+1)*cols]
				for k, v := range row {
					dst[k] = float32(v)
				}
			}
		}(lo, hi)
	}
	wg.Wait()
	return out
}

// spikeIndicator returns y[u] = 1 when at least one spike falls in bin u,
// for bins 0..n-1.
func spikeIndicator(spikes []int32, n int) []bool {
	y := make([]bool, n)
	for _, s := range spikes {
		if s >= 0 && int(s) < n {
			y[s] = true
		}
	}
	return y
}

// histDesign computes the history columns for bins 0..n-1: column i of bin
// u is sum_{j>=1} H_i(j) y[u-j]. Rows of len(h.Rows) floats, back to back.
func histDesign(y []bool, h *Basis, dst []float32) {
	nb := len(h.Rows)
	clear(dst)
	n := len(y)
	for q, s := range y {
		if !s {
			continue
		}
		for j := 1; j < h.Len && q+j < n; j++ {
			row := dst[(q+j)*nb : (q+j+1)*nb]
			for i := range row {
				row[i] += float32(h.Rows[i][j])
			}
		}
	}
}
