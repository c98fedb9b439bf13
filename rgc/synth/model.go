package synth

import (
	"fmt"
	"math"
	"sort"

	"rgcpred/rgc"
)

// numPatterns is the number of LED patterns (each of four LEDs on or off).
const numPatterns = 1 << rgc.StimChannels

// frames is a bin-aligned stimulus: frame i covers bins [start[i],
// start[i+1]) with LED pattern pat[i] (bit c set when LED c is on). Bins
// before start[0] have every LED at the mean level (state 0 after centring).
type frames struct {
	start []int   // len(pat)+1 entries, increasing
	pat   []uint8 // pattern index of each frame
}

// end returns the first bin after the last frame.
func (f *frames) end() int { return f.start[len(f.start)-1] }

// frameAt returns the index of the frame covering bin b, or -1 before the
// first frame; b must be below end().
func (f *frames) frameAt(b int) int {
	// First frame starting after b, minus one.
	return sort.SearchInts(f.start[:len(f.pat)], b+1) - 1
}

// ReadFrames reads the frame-level stimulus of a recording whose triggers
// fall on bin boundaries (every synthetic recording's do, and rgc/glm aligns
// a real one's): each frame's first bin (one more entry, the end of the
// last frame) and its LED pattern (bit c set when LED c is on).
func ReadFrames(r *rgc.Raw) (start []int, pattern []uint8, err error) {
	f, err := framesFromRaw(r)
	if err != nil {
		return nil, nil, err
	}
	return f.start, f.pat, nil
}

// framesFromRaw reads the stimulus of a recording whose triggers fall on bin
// boundaries (every synthetic recording's do).
func framesFromRaw(r *rgc.Raw) (*frames, error) {
	if len(r.Pattern) == 0 {
		return nil, fmt.Errorf("recording %s has no stimulus frames", r.Name)
	}
	if len(r.Triggers) != len(r.Pattern)+1 {
		return nil, fmt.Errorf("recording %s: %d triggers for %d frames", r.Name, len(r.Triggers), len(r.Pattern))
	}
	f := &frames{start: make([]int, len(r.Triggers)), pat: make([]uint8, len(r.Pattern))}
	for i, s := range r.Triggers {
		if s%rgc.Decimation != 0 {
			return nil, fmt.Errorf("recording %s: trigger %d at sensor sample %d is not on a bin boundary (a multiple of %d): not a synthetic recording", r.Name, i, s, rgc.Decimation)
		}
		f.start[i] = int(s / rgc.Decimation)
		if i > 0 && f.start[i] <= f.start[i-1] {
			return nil, fmt.Errorf("recording %s: triggers %d and %d are not increasing", r.Name, i-1, i)
		}
	}
	for i, p := range r.Pattern {
		for c, v := range p {
			if v != 0 && v != 1 {
				return nil, fmt.Errorf("recording %s: frame %d LED %d has state %d, want 0 or 1", r.Name, i, c, v)
			}
			f.pat[i] |= uint8(v) << c
		}
	}
	return f, nil
}

// level returns LED c's centred state (+-0.5) in pattern p.
func level(p uint8, c int) float64 {
	if p>>c&1 == 1 {
		return 0.5
	}
	return -0.5
}

// cellModel is a cell's parameters in the form the simulation and the oracle
// evaluate quickly.
type cellModel struct {
	bias    float64
	lk      int         // stimulus filter length
	latency int         // first lag with a non-zero stimulus weight (lk if none)
	kp      [][]float64 // kp[p][n] = sum_c level(p,c) sum_{j<=n} k_c[j], n < lk
	kpTot   []float64   // kp[p][lk-1], the response to a pattern held forever
	hist    []float64   // h[j] at index j-1
	// expDelta[(p*numPatterns+q)*Horizon + n] = exp(kp[q][n] - kp[p][n]):
	// the factor by which lambda changes n bins after a switch from
	// pattern p to pattern q.
	expDelta []float64
}

func newCellModel(c *CellParams) *cellModel {
	lk := len(c.StimFilter[0])
	m := &cellModel{bias: c.Bias, lk: lk, latency: lk, hist: c.HistFilter}
	for j := 0; j < lk && m.latency == lk; j++ {
		for ch := range c.StimFilter {
			if c.StimFilter[ch][j] != 0 {
				m.latency = j
				break
			}
		}
	}
	var cum [rgc.StimChannels][]float64
	for ch := range cum {
		cum[ch] = make([]float64, lk)
		s := 0.0
		for j, v := range c.StimFilter[ch] {
			s += v
			cum[ch][j] = s
		}
	}
	m.kp = make([][]float64, numPatterns)
	m.kpTot = make([]float64, numPatterns)
	for p := range m.kp {
		m.kp[p] = make([]float64, lk)
		for n := range m.kp[p] {
			s := 0.0
			for ch := range cum {
				s += level(uint8(p), ch) * cum[ch][n]
			}
			m.kp[p][n] = s
		}
		m.kpTot[p] = m.kp[p][lk-1]
	}
	m.expDelta = make([]float64, numPatterns*numPatterns*rgc.Horizon)
	for p := 0; p < numPatterns; p++ {
		for q := 0; q < numPatterns; q++ {
			row := m.expDelta[(p*numPatterns+q)*rgc.Horizon:][:rgc.Horizon]
			for n := range row {
				row[n] = math.Exp(m.kpAt(q, n) - m.kpAt(p, n))
			}
		}
	}
	return m
}

// kpAt returns the response n bins after the onset of pattern p held from
// then on (from a zero level): 0 for n < 0, constant for n >= lk.
func (m *cellModel) kpAt(p, n int) float64 {
	switch {
	case n < 0:
		return 0
	case n >= m.lk:
		return m.kpTot[p]
	}
	return m.kp[p][n]
}

// stimDrive returns sum_c sum_j k_c[j] s_c[u-j] when the stimulus is known
// up to bin known and the frame covering bin known continues unchanged after
// it (pass known >= u for the true drive). fu is the index of the frame
// covering min(u, known) (-1 before the first frame). The drive is a sum over
// frame switches: a switch at bin a from pattern p to q adds
// kp[q][u-a] - kp[p][u-a]; switches at least lk bins back telescope into the
// level held since then.
func (m *cellModel) stimDrive(f *frames, u, fu int) float64 {
	if fu < 0 {
		return 0
	}
	d := 0.0
	i := fu
	for ; i >= 0; i-- {
		n := u - f.start[i]
		if n >= m.lk {
			// Frame i started long enough ago: everything up to its start
			// is summarised by its pattern held forever.
			return d + m.kpTot[f.pat[i]]
		}
		if n >= m.latency {
			d += m.kp[f.pat[i]][n]
			if i > 0 {
				d -= m.kp[f.pat[i-1]][n]
			}
		}
	}
	return d
}
